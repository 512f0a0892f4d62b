/* The interface of libunwind_stripped.so (unwind_lib.c): code that calls
 * back into the program, shipped the way distributions ship libraries —
 * no frame pointers, no symbol table, only .eh_frame to unwind with. */
#ifndef LOUPE_TESTS_TESTPROGS_UNWIND_LIB_H_
#define LOUPE_TESTS_TESTPROGS_UNWIND_LIB_H_

typedef unsigned long (*lib_callback)(unsigned long);

/* Calls `callback` `rounds` times, each from a function of the library
 * that has no symbol once stripped. */
unsigned long lib_work(lib_callback callback, unsigned long rounds);

#endif
