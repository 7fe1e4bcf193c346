/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat.h -- helpers of the differential test programs of test/compat/.
 *
 * Each program is compiled twice, once against Debian's librpma (the system
 * <librpma.h>) and once against arpma's include/librpma.h, and must print the
 * same lines (test/compat/run.sh compares them). One line is one check:
 *
 *   <check name>: ret=<RPMA_E_* name or number> [value=...] [out=untouched]
 *
 * Only stable facts are printed: return codes, values, whether an
 * out-parameter kept its sentinel, whether two pointers are equal -- never an
 * address, a file name, a line number or the text of a log message.
 * Diagnostics that may differ go to stderr, which is not compared.
 */
#ifndef COMPAT_H
#define COMPAT_H 1

#include <librpma.h>

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* out-parameter sentinels: a failed call must leave them as they are */
#define SENTINEL_PTR ((void*)(uintptr_t)0x5e5e5e5e5e5e5e50u)
#define SENTINEL_U32 0x5e5e5e5eu
#define SENTINEL_INT 0x5e5e5e5e
#define SENTINEL_BYTE 0x5eu

static int compat_checks;

/* The name of a return code: 0, an RPMA_* macro name, or the number. */
static inline const char* ret_name(int ret) {
  static char buf[32];
  switch (ret) {
    case 0: return "0";
    case RPMA_W_WAIT_FOR_COMPLETION: return "RPMA_W_WAIT_FOR_COMPLETION";
    case RPMA_E_UNKNOWN: return "RPMA_E_UNKNOWN";
    case RPMA_E_NOSUPP: return "RPMA_E_NOSUPP";
    case RPMA_E_PROVIDER: return "RPMA_E_PROVIDER";
    case RPMA_E_NOMEM: return "RPMA_E_NOMEM";
    case RPMA_E_INVAL: return "RPMA_E_INVAL";
    case RPMA_E_NO_COMPLETION: return "RPMA_E_NO_COMPLETION";
    case RPMA_E_NO_EVENT: return "RPMA_E_NO_EVENT";
    case RPMA_E_AGAIN: return "RPMA_E_AGAIN";
    case RPMA_E_SHARED_CHANNEL: return "RPMA_E_SHARED_CHANNEL";
    case RPMA_E_NOT_SHARED_CHNL: return "RPMA_E_NOT_SHARED_CHNL";
    default: snprintf(buf, sizeof buf, "%d", ret); return buf;
  }
}

static inline const char* level_name(int level) {
  static char buf[32];
  switch (level) {
    case RPMA_LOG_DISABLED: return "DISABLED";
    case RPMA_LOG_LEVEL_FATAL: return "FATAL";
    case RPMA_LOG_LEVEL_ERROR: return "ERROR";
    case RPMA_LOG_LEVEL_WARNING: return "WARNING";
    case RPMA_LOG_LEVEL_NOTICE: return "NOTICE";
    case RPMA_LOG_LEVEL_INFO: return "INFO";
    case RPMA_LOG_LEVEL_DEBUG: return "DEBUG";
    default: snprintf(buf, sizeof buf, "%d", level); return buf;
  }
}

/* One check line: "<name>: <fmt...>". */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline void
check(const char* name, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s: ", name);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  fflush(stdout);
  ++compat_checks;
}

/* "ret=X": a call without out-parameters. */
static inline void check_ret(const char* name, int ret) { check(name, "ret=%s", ret_name(ret)); }

/* A pointer out-parameter that held SENTINEL_PTR before the call. */
static inline const char* ptr_state(const void* p) {
  if (p == SENTINEL_PTR) return "untouched";
  return p == NULL ? "NULL" : "set";
}

static inline void check_ptr(const char* name, int ret, const void* out) {
  check(name, "ret=%s out=%s", ret_name(ret), ptr_state(out));
}

static inline void check_u32(const char* name, int ret, uint32_t out) {
  if (out == SENTINEL_U32)
    check(name, "ret=%s out=untouched", ret_name(ret));
  else
    check(name, "ret=%s value=%u", ret_name(ret), out);
}

static inline void check_int(const char* name, int ret, int out) {
  if (out == SENTINEL_INT)
    check(name, "ret=%s out=untouched", ret_name(ret));
  else
    check(name, "ret=%s value=%d", ret_name(ret), out);
}

/* A bool out-parameter, observed through its byte (SENTINEL_BYTE before). */
static inline void check_bool_byte(const char* name, int ret, unsigned char byte) {
  if (byte == SENTINEL_BYTE)
    check(name, "ret=%s out=untouched", ret_name(ret));
  else
    check(name, "ret=%s value=%u", ret_name(ret), (unsigned)byte);
}

/* The last line of every program; run.sh counts the checks from it. */
static inline int compat_end(const char* program) {
  printf("%s: end, %d checks\n", program, compat_checks);
  return 0;
}

#endif /* COMPAT_H */
