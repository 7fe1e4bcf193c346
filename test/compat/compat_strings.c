/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat_strings.c -- rpma_err_2str and rpma_utils_conn_event_2str for every
 * defined value and for values that are not defined. No device needed.
 */
#include "compat.h"

static void err(const char* label, int value) {
  char name[96];
  snprintf(name, sizeof name, "err_2str(%s)", label);
  const char* s = rpma_err_2str(value);
  if (s == NULL)
    check(name, "NULL");
  else
    check(name, "\"%s\"", s);
}

static void event(const char* label, int value) {
  char name[96];
  snprintf(name, sizeof name, "conn_event_2str(%s)", label);
  const char* s = rpma_utils_conn_event_2str((enum rpma_conn_event)value);
  if (s == NULL)
    check(name, "NULL");
  else
    check(name, "\"%s\"", s);
}

int main(void) {
#define ERR(v) err(#v, v)
  ERR(0);
  ERR(RPMA_W_WAIT_FOR_COMPLETION);
  ERR(RPMA_E_UNKNOWN);
  ERR(RPMA_E_NOSUPP);
  ERR(RPMA_E_PROVIDER);
  ERR(RPMA_E_NOMEM);
  ERR(RPMA_E_INVAL);
  ERR(RPMA_E_NO_COMPLETION);
  ERR(RPMA_E_NO_EVENT);
  ERR(RPMA_E_AGAIN);
  ERR(RPMA_E_SHARED_CHANNEL);
  ERR(RPMA_E_NOT_SHARED_CHNL);
  ERR(-100010);
  ERR(-99999);
  ERR(-1);
  ERR(2);
  ERR(100000);
  ERR(INT_MIN);
  ERR(INT_MAX);
#undef ERR

#define EVENT(v) event(#v, v)
  EVENT(RPMA_CONN_UNDEFINED);
  EVENT(RPMA_CONN_ESTABLISHED);
  EVENT(RPMA_CONN_CLOSED);
  EVENT(RPMA_CONN_LOST);
  EVENT(RPMA_CONN_REJECTED);
  EVENT(RPMA_CONN_UNREACHABLE);
  EVENT(5);
  EVENT(6);
  EVENT(-2);
  EVENT(1000);
  EVENT(INT_MIN);
#undef EVENT

  /* the strings are static: the same pointer every time */
  check("err_2str(RPMA_E_INVAL) same pointer twice", "%s",
        rpma_err_2str(RPMA_E_INVAL) == rpma_err_2str(RPMA_E_INVAL) ? "yes" : "no");
  check("conn_event_2str(RPMA_CONN_LOST) same pointer twice", "%s",
        rpma_utils_conn_event_2str(RPMA_CONN_LOST) == rpma_utils_conn_event_2str(RPMA_CONN_LOST)
            ? "yes"
            : "no");
  return compat_end("compat_strings");
}
