//go:build cgo_threads

// Built with -tags cgo_threads, the runtime starts its threads through C's
// pthread_create (runtime/cgo), as any Go program linked with cgo does:
// each thread's stack then begins in C code with no frame information.
package main

import _ "runtime/cgo"
