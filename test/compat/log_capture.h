/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log_capture.h -- a user logging function (rpma_log_set_function) that
 * records what it receives, and helpers to print the stable facts of it.
 *
 * Stable: whether it was called, the levels, whether file, line and function
 * are given, whether the formatted message is non-empty and ends with a
 * newline. Not stable (differs between librpma and arpma, deliberately): the
 * format string itself (librpma passes its own format and arguments, arpma
 * "%s\n" and the formatted text), file names, line numbers, function names
 * and the wording; these go to stderr only.
 */
#ifndef COMPAT_LOG_CAPTURE_H
#define COMPAT_LOG_CAPTURE_H 1

#include "compat.h"

#include <pthread.h>

struct log_capture {
  pthread_mutex_t lock;
  int calls;
  unsigned levels;    /* bit (level + 1) for each level received */
  int first_valid;    /* the first_* fields describe a message */
  int first_has_file; /* file_name != NULL */
  int first_line_pos; /* line_no > 0 */
  int first_has_func; /* function_name != NULL */
  int first_nonempty; /* formatted message is not empty */
  int first_newline;  /* formatted message ends with '\n' */
};

static struct log_capture captured = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, 0, 0};

static void capture_function(enum rpma_log_level level, const char* file_name, const int line_no,
                             const char* function_name, const char* message_format, ...) {
  char text[2048] = "";
  if (message_format != NULL) {
    va_list ap;
    va_start(ap, message_format);
    vsnprintf(text, sizeof text, message_format, ap);
    va_end(ap);
  }
  size_t len = strlen(text);
  pthread_mutex_lock(&captured.lock);
  ++captured.calls;
  if ((int)level >= -1 && (int)level < 30) captured.levels |= 1u << ((int)level + 1);
  if (!captured.first_valid) {
    captured.first_valid = 1;
    captured.first_has_file = file_name != NULL;
    captured.first_line_pos = line_no > 0;
    captured.first_has_func = function_name != NULL;
    captured.first_nonempty = len > 0;
    captured.first_newline = len > 0 && text[len - 1] == '\n';
  }
  pthread_mutex_unlock(&captured.lock);
  /* the wording is not compared, but it is what explains a difference */
  fprintf(stderr, "[log %s] %s:%d %s: %s%s", level_name(level), file_name ? file_name : "(null)",
          line_no, function_name ? function_name : "(null)", text,
          len > 0 && text[len - 1] == '\n' ? "" : "\n");
}

static inline void capture_reset(void) {
  pthread_mutex_lock(&captured.lock);
  captured.calls = 0;
  captured.levels = 0;
  pthread_mutex_unlock(&captured.lock);
}

/* "none" or the distinct levels received since capture_reset, e.g. "ERROR". */
static inline const char* capture_levels(void) {
  static char buf[128];
  pthread_mutex_lock(&captured.lock);
  unsigned levels = captured.levels;
  int calls = captured.calls;
  pthread_mutex_unlock(&captured.lock);
  if (calls == 0) return "none";
  buf[0] = '\0';
  for (int l = -1; l < 30; ++l) {
    if (!(levels & (1u << (l + 1)))) continue;
    if (buf[0] != '\0') strncat(buf, ",", sizeof buf - strlen(buf) - 1);
    strncat(buf, level_name(l), sizeof buf - strlen(buf) - 1);
  }
  return buf;
}

#endif /* COMPAT_LOG_CAPTURE_H */
