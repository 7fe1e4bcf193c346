/*
 * header_stdio.c -- <librpma.h> alone is enough for what librpma's examples
 * use of the C library through it: stderr, fprintf and printf (librpma's
 * header includes <stdio.h>; 8 of its 34 example programs rely on that).
 * Nothing else is included here on purpose. Exit status 0 = it ran.
 */
#include <librpma.h>

int main(void) {
  const char* text = rpma_err_2str(RPMA_E_INVAL);
  if (fprintf(stderr, "header_stdio: rpma_err_2str(RPMA_E_INVAL) = %s\n", text) < 0) return 1;
  return printf("header_stdio: ok\n") < 0 ? 1 : 0;
}
