/* test_errors_conv.c: (being written) */
#include "test_util.h"

int main(void) { return 0; }
