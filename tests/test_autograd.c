/* test_autograd.c: (being written) */
#include "test_util.h"

int main(void) { return 0; }
