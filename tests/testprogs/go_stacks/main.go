// A Go program whose goroutines grow their stacks and are scanned by the
// garbage collector all the time: what a return probe's swapped return
// address does not survive, and what restarts a function at its first
// instruction. Prints "ready PID", waits for a line on stdin, makes
// <calls> calls of work(i) (i from 0, over 4 goroutines), prints
// "done <calls>" and exits 0.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
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

// Each call starts on a fresh goroutine's small stack, which its own frame
// outgrows at once: the runtime grows the stack and restarts it at its
// first instruction.
//
//go:noinline
func work(i int) int {
	var scratch [16384]byte
	scratch[i%len(scratch)] = byte(i)
	return deep(50+i%200) + int(scratch[(i*7)%len(scratch)])
}

func main() {
	calls, _ := strconv.Atoi(os.Args[1])
	fmt.Println("ready", os.Getpid())
	bufio.NewReader(os.Stdin).ReadString('\n')
	results := make(chan int)
	const workers = 4
	for g := 0; g < workers; g++ {
		go func(first int) {
			sum := 0
			for i := first; i < calls; i += workers {
				done := make(chan int)
				go func(i int) { done <- work(i) }(i)
				sum += <-done
				if i%64 == 0 {
					runtime.GC()
				}
			}
			results <- sum
		}(g)
	}
	for g := 0; g < workers; g++ {
		<-results
	}
	fmt.Println("done", calls)
}
