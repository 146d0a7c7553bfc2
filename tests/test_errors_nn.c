/* test_errors_nn.c: (being written) */
#include "test_util.h"

int main(void) { return 0; }
