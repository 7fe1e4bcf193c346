/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.c -- what the C connection examples share (see common.h).
 */

#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int parse_args(int argc, char* argv[], const char** addr, const char** port, int* count_ptr) {
  int ok = argc == 3 || (count_ptr && argc == 5 && strcmp(argv[3], "--count") == 0);
  if (ok && count_ptr) {
    *count_ptr = argc == 5 ? atoi(argv[4]) : 1;
    ok = *count_ptr > 0;
  }
  if (!ok) {
    fprintf(stderr, "usage: %s <addr> <port>%s\n", argv[0], count_ptr ? " [--count N]" : "");
    return -1;
  }
  *addr = argv[1];
  *port = argv[2];
  return 0;
}

int quiet_limit_ms(void) {
  const char* env = getenv("EXAMPLE_QUIET_MS");
  int ms = env ? atoi(env) : 0;
  return ms > 0 ? ms : 10000;
}

long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int set_nonblock(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags == -1) return -1;
  return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

int wait_readable(int fd, long long deadline_ms) {
  for (;;) {
    long long left = deadline_ms - now_ms();
    if (left <= 0) return EXAMPLE_TIMED_OUT;
    struct pollfd pfd = {.fd = fd, .events = POLLIN, .revents = 0};
    int n = poll(&pfd, 1, (int)left);
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -1;
  }
}

int next_conn_req(struct rpma_ep* ep, const struct rpma_conn_cfg* cfg, int timeout_ms,
                  struct rpma_conn_req** req_ptr) {
  int fd = -1;
  int ret = rpma_ep_get_fd(ep, &fd);
  if (ret) return ret;
  const long long deadline = now_ms() + timeout_ms;
  do {
    int w = wait_readable(fd, deadline);
    if (w == EXAMPLE_TIMED_OUT) return w;
    if (w) return RPMA_E_PROVIDER;
  } while ((ret = rpma_ep_next_conn_req(ep, cfg, req_ptr)) == RPMA_E_NO_EVENT);
  return ret;
}

int next_event(struct rpma_conn* conn, int timeout_ms, enum rpma_conn_event* event) {
  int fd = -1;
  int ret = rpma_conn_get_event_fd(conn, &fd);
  if (ret) return ret;
  const long long deadline = now_ms() + timeout_ms;
  do {
    int w = wait_readable(fd, deadline);
    if (w == EXAMPLE_TIMED_OUT) return w;
    if (w) return RPMA_E_PROVIDER;
  } while ((ret = rpma_conn_next_event(conn, event)) == RPMA_E_NO_EVENT);
  return ret;
}

const char* pdata_text(const struct rpma_conn_private_data* pdata, char* buf, size_t size) {
  size_t len = pdata->ptr ? pdata->len : 0;
  if (len >= size) len = size - 1;
  if (len) memcpy(buf, pdata->ptr, len);
  buf[len] = '\0';
  return buf;
}
