/* A C library that calls back into its caller: a C++ exception thrown by
 * the callback unwinds through run_callback's frame, though this file has
 * no exception tables of its own. */
__attribute__((noinline)) long run_callback(long (*callback)(long), long x)
{
	const long result = callback(x);

	return result + 1; /* not a tail call: its own return */
}
