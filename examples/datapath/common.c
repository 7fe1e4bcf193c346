/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * common.c -- what the C data-path examples share (see common.h).
 */

#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <stdio.h>
#include <time.h>

int dp_fail(const char* who, const char* step, int ret) {
  if (ret == EXAMPLE_TIMED_OUT)
    printf("%s: %s: nothing heard for %d ms, giving up\n", who, step, QUIET_LIMIT_MS);
  else
    printf("%s: %s failed: %s\n", who, step, rpma_err_2str(ret));
  return -1;
}

int dp_peer_new(const char* who, const char* addr, int local, struct rpma_peer** peer_ptr) {
  struct ibv_context* dev = NULL;
  int ret = rpma_utils_get_ibv_context(
      addr, local ? RPMA_UTIL_IBV_CONTEXT_LOCAL : RPMA_UTIL_IBV_CONTEXT_REMOTE, &dev);
  if (ret) return dp_fail(who, "finding the RDMA device", ret);
  ret = rpma_peer_new(dev, peer_ptr);
  if (ret) return dp_fail(who, "creating the peer", ret);
  return 0;
}

int dp_listen(const char* who, struct rpma_peer* peer, const char* addr, const char* port,
              struct rpma_ep** ep_ptr) {
  int ret = rpma_ep_listen(peer, addr, port, ep_ptr);
  if (ret) {
    printf("%s: cannot listen on %s:%s: %s\n", who, addr, port, rpma_err_2str(ret));
    return -1;
  }
  printf("%s: listening on %s:%s\n", who, addr, port);
  return 0;
}

static void pause_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int dp_connect(const char* who, struct rpma_peer* peer, const char* addr, const char* port,
               const struct rpma_conn_cfg* cfg, struct rpma_conn** conn_ptr) {
  const long long give_up = now_ms() + RETRY_LIMIT_MS;
  for (;;) {
    struct rpma_conn_req* req = NULL;
    int ret = rpma_conn_req_new(peer, addr, port, cfg, &req);
    if (ret) return dp_fail(who, "rpma_conn_req_new", ret);
    /* Connecting consumes the request, whatever the outcome. */
    ret = rpma_conn_req_connect(&req, NULL, conn_ptr);
    if (ret == RPMA_E_PROVIDER && now_ms() <= give_up) {
      /* iWARP refuses in rdma_connect itself (the kernel's TCP connect), not as REJECTED. */
      pause_ms(RETRY_PAUSE_MS);
      continue;
    }
    if (ret) return dp_fail(who, "connecting", ret);

    enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
    ret = next_event(*conn_ptr, QUIET_LIMIT_MS, &event);
    if (!ret && event == RPMA_CONN_ESTABLISHED) return 0;
    (void)rpma_conn_delete(conn_ptr);
    if (ret) return dp_fail(who, "waiting for the connection to be established", ret);
    if ((event != RPMA_CONN_REJECTED && event != RPMA_CONN_UNREACHABLE) || now_ms() > give_up) {
      printf("%s: connection not established: %s\n", who, rpma_utils_conn_event_2str(event));
      return -1;
    }
    pause_ms(RETRY_PAUSE_MS); /* the server is not listening yet */
  }
}

int dp_server_region(const char* who, struct rpma_conn* conn, struct rpma_mr_remote** remote_ptr) {
  struct rpma_conn_private_data pdata;
  int ret = rpma_conn_get_private_data(conn, &pdata);
  if (ret) return dp_fail(who, "rpma_conn_get_private_data", ret);
  ret = rpma_mr_remote_from_descriptor(pdata.ptr, pdata.len, remote_ptr);
  if (ret) return dp_fail(who, "decoding the server's region descriptor", ret);
  size_t size = 0;
  ret = rpma_mr_remote_get_size(*remote_ptr, &size);
  if (ret) return dp_fail(who, "rpma_mr_remote_get_size", ret);
  printf("%s: the server's region: %zu bytes\n", who, size);
  return 0;
}

int dp_next_req(const char* who, struct rpma_ep* ep, const struct rpma_conn_cfg* cfg,
                struct rpma_conn_req** req_ptr) {
  int ret = next_conn_req(ep, cfg, QUIET_LIMIT_MS, req_ptr);
  if (ret) return dp_fail(who, "waiting for a connection request", ret);
  return 0;
}

int dp_accept(const char* who, struct rpma_conn_req** req_ptr, const void* pdata, size_t len,
              struct rpma_conn** conn_ptr) {
  struct rpma_conn_private_data data = {(void*)pdata, len};
  /* librpma takes no private data as NULL, never as an empty one. */
  int ret = rpma_conn_req_connect(req_ptr, pdata ? &data : NULL, conn_ptr);
  if (ret) return dp_fail(who, "accepting", ret);
  enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
  ret = next_event(*conn_ptr, QUIET_LIMIT_MS, &event);
  if (ret || event != RPMA_CONN_ESTABLISHED) {
    if (ret)
      dp_fail(who, "waiting for the connection to be established", ret);
    else
      printf("%s: connection not established: %s\n", who, rpma_utils_conn_event_2str(event));
    (void)rpma_conn_delete(conn_ptr);
    return -1;
  }
  printf("%s: connection established%s\n", who,
         pdata ? ", region descriptor sent in the private data" : "");
  return 0;
}

int dp_wait_closed(const char* who, const char* other, struct rpma_conn** conn_ptr) {
  enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
  int ret = next_event(*conn_ptr, QUIET_LIMIT_MS, &event);
  int failed = 0;
  if (ret) {
    char step[64];
    snprintf(step, sizeof(step), "waiting for the %s to disconnect", other);
    failed = dp_fail(who, step, ret);
  } else if (event != RPMA_CONN_CLOSED) {
    printf("%s: unexpected connection event: %s\n", who, rpma_utils_conn_event_2str(event));
    failed = -1;
  }
  if (!failed && (ret = rpma_conn_disconnect(*conn_ptr)))
    failed = dp_fail(who, "rpma_conn_disconnect", ret);
  ret = rpma_conn_delete(conn_ptr);
  if (ret) return dp_fail(who, "rpma_conn_delete", ret);
  if (!failed) printf("%s: %s disconnected, connection closed\n", who, other);
  return failed;
}

int dp_disconnect(const char* who, struct rpma_conn** conn_ptr) {
  int failed = 0;
  int ret = rpma_conn_disconnect(*conn_ptr);
  if (ret) failed = dp_fail(who, "rpma_conn_disconnect", ret);
  enum rpma_conn_event event = RPMA_CONN_UNDEFINED;
  if (!failed && (ret = next_event(*conn_ptr, QUIET_LIMIT_MS, &event)))
    failed = dp_fail(who, "waiting for the connection to close", ret);
  ret = rpma_conn_delete(conn_ptr);
  if (ret) return dp_fail(who, "rpma_conn_delete", ret);
  if (!failed) printf("%s: disconnected, connection closed\n", who);
  return failed;
}

int dp_wait_wc(const char* who, const char* what, struct rpma_cq* cq, struct ibv_wc* wc) {
  int fd = -1;
  int ret = rpma_cq_get_fd(cq, &fd);
  if (ret) return dp_fail(who, "rpma_cq_get_fd", ret);
  if (set_nonblock(fd)) return dp_fail(who, "making the CQ's fd non-blocking", RPMA_E_PROVIDER);
  const long long deadline = now_ms() + QUIET_LIMIT_MS;
  /* Take what is there; else acknowledge and re-arm (rpma_cq_wait), look
   * again (a completion may have come in between), and only then sleep in
   * poll() until the armed CQ signals its channel. */
  while ((ret = rpma_cq_get_wc(cq, 1, wc, NULL)) == RPMA_E_NO_COMPLETION) {
    ret = rpma_cq_wait(cq);
    if (ret == 0) continue;
    if (ret != RPMA_E_NO_COMPLETION) return dp_fail(who, what, ret);
    ret = wait_readable(fd, deadline);
    if (ret == EXAMPLE_TIMED_OUT) return dp_fail(who, what, ret);
    if (ret) return dp_fail(who, what, RPMA_E_PROVIDER);
  }
  if (ret) return dp_fail(who, what, ret);
  if (wc->status != IBV_WC_SUCCESS) {
    printf("%s: %s failed: %s\n", who, what, ibv_wc_status_str(wc->status));
    return -1;
  }
  return 0;
}
