// A Go program whose goroutines grow their stacks and are scanned by the
// garbage collector all the time: what a return probe's swapped return
// address does not survive. Prints "ready PID", runs for the seconds given,
// prints "done" and exits 0.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

//go:noinline
func deep(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%256])
}

//go:noinline
func work(i int) int { return deep(50 + i%200) }

func main() {
	seconds, _ := strconv.Atoi(os.Args[1])
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	fmt.Println("ready", os.Getpid())
	done := make(chan int)
	for g := 0; g < 4; g++ {
		go func() {
			sum := 0
			for i := 0; time.Now().Before(deadline); i++ {
				sum += work(i)
				if i%256 == 0 {
					runtime.GC()
				}
			}
			done <- sum
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	fmt.Println("done")
}
