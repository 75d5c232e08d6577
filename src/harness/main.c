#include <stdio.h>

int main(void)
{
	puts("megabench: under construction");
	return 0;
}
