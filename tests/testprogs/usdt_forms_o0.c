/* Unoptimised: locals live at negative offsets from %rbp; literals are
 * constants. */
#include <stdio.h>
#include <sys/sdt.h>
#include "usdt_forms.h"

void usdt_forms_stack(int seed)
{
	int local = seed * 3;
	unsigned char byte = (unsigned char)(seed + 200);

	DTRACE_PROBE3(forms, stack, local, byte, 42);
	printf("expect forms:stack %d %d %d\n", local, byte, 42);
}
