/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * compat_datapath.c -- the data path and completion calls: memory
 * registration and descriptors, rpma_read / write / write_with_imm /
 * atomic_write / flush / send / send_with_imm / recv / conn_req_recv, with
 * their completions (status, opcode, byte_len, imm, wr_id), rpma_cq_get_wc /
 * rpma_cq_wait / rpma_conn_wait / rpma_conn_get_compl_fd with and without a
 * shared completion channel, and the argument errors of all of them.
 *
 *   compat_datapath                        argument checks that need no
 *                                          device (NULL objects, descriptors)
 *   compat_datapath ADDR SILENT NO_ROUTE [--device-names]
 *                                          also the device section: a forked
 *                                          child is the server, the parent
 *                                          the client (SILENT and NO_ROUTE
 *                                          are not used)
 *
 * Never printed: addresses, keys, qp numbers, fds -- only sizes, usages,
 * return codes, completion fields and whether bytes arrived.
 * Output order: the client's lines as they happen, then the server's. Every
 * wait is bounded (poll with timeouts, alarm() as a last resort).
 */
#include "compat.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PORT "7310"
#define REGION 4096
#define WAIT_MS 10000 /* the longest any single wait may take */

static const char* side = "";

static void say(const char* name, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void say(const char* name, const char* fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (side[0] == '\0') {
    check(name, "%s", text);
    return;
  }
  char full[256];
  snprintf(full, sizeof full, "%s: %s", side, name);
  check(full, "%s", text);
}

static void say_ret(const char* name, int ret) { say(name, "ret=%s", ret_name(ret)); }
static void say_ptr(const char* name, int ret, const void* p) {
  say(name, "ret=%s out=%s", ret_name(ret), ptr_state(p));
}
static void say_int(const char* name, int ret, int v) {
  if (v == SENTINEL_INT)
    say(name, "ret=%s out=untouched", ret_name(ret));
  else
    say(name, "ret=%s value=%d", ret_name(ret), v);
}
static void say_size(const char* name, int ret, size_t v, size_t sentinel) {
  if (v == sentinel)
    say(name, "ret=%s out=untouched", ret_name(ret));
  else
    say(name, "ret=%s value=%zu", ret_name(ret), v);
}
static void say_fd(const char* name, int ret, int fd) {
  if (fd == SENTINEL_INT)
    say(name, "ret=%s out=untouched", ret_name(ret));
  else
    say(name, "ret=%s fd>=0=%s", ret_name(ret), fd >= 0 ? "yes" : "no");
}

static const char* opcode_name(int op) {
  static char buf[32];
  switch (op) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "RDMA_READ";
    case IBV_WC_COMP_SWAP: return "COMP_SWAP";
    case IBV_WC_FETCH_ADD: return "FETCH_ADD";
    case IBV_WC_RECV: return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
    default: snprintf(buf, sizeof buf, "%d", op); return buf;
  }
}

/* a completion: its stable fields (byte_len only where verbs defines it: receives) */
static void say_wc(const char* name, const struct ibv_wc* wc) {
  char extra[96] = "";
  if (wc->opcode & IBV_WC_RECV) {
    int n = snprintf(extra, sizeof extra, " byte_len=%u", wc->byte_len);
    if (wc->wc_flags & IBV_WC_WITH_IMM)
      snprintf(extra + n, sizeof extra - (size_t)n, " imm=%u", ntohl(wc->imm_data));
  }
  say(name, "status=%s opcode=%s wr_id=%llu%s", ibv_wc_status_str(wc->status),
      opcode_name(wc->opcode), (unsigned long long)wc->wr_id, extra);
}

static int wait_readable(int fd, int ms) {
  struct pollfd pfd = {fd, POLLIN, 0};
  for (;;) {
    int n = poll(&pfd, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    return n == 1;
  }
}

static int set_nonblock(int fd, int on) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return -1;
  return fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

/*
 * the next completion of cq within WAIT_MS: rpma_cq_wait on its own channel, or rpma_conn_wait
 * on conn's shared one (conn != NULL); 0, or -1 (and a line) when none came
 */
static int next_wc(struct rpma_conn* conn, struct rpma_cq* cq, struct ibv_wc* wc,
                   const char* name) {
  int fd = -1;
  if (conn != NULL)
    (void)rpma_conn_get_compl_fd(conn, &fd);
  else
    (void)rpma_cq_get_fd(cq, &fd);
  for (int rounds = 0; rounds < 100; ++rounds) {
    int ret = rpma_cq_get_wc(cq, 1, wc, NULL);
    if (ret == 0) return 0;
    if (ret != RPMA_E_NO_COMPLETION) {
      say(name, "rpma_cq_get_wc: ret=%s", ret_name(ret));
      return -1;
    }
    if (fd < 0 || !wait_readable(fd, WAIT_MS)) break;
    if (conn != NULL) {
      struct rpma_cq* fired = NULL;
      (void)rpma_conn_wait(conn, 0, &fired, NULL);
    } else {
      (void)rpma_cq_wait(cq);
    }
  }
  say(name, "no completion within %d ms", WAIT_MS);
  return -1;
}

static void expect_wc(struct rpma_conn* conn, struct rpma_cq* cq, const char* name) {
  struct ibv_wc wc;
  memset(&wc, 0, sizeof wc);
  if (next_wc(conn, cq, &wc, name) == 0) say_wc(name, &wc);
}

/* ---- no device: NULL objects and descriptors ------------------------------ */

static void no_device(void) {
  int ret;
  char eight[8] = {0};
  /* a descriptor made by hand: addr, length 4096, rkey, usage WRITE_DST | VISIBILITY */
  unsigned char desc[24];
  memset(desc, 0, sizeof desc);
  uint64_t len = REGION;
  for (int i = 0; i < 8; ++i) desc[8 + i] = (unsigned char)(len >> (8 * i));
  desc[16] = 0x11;
  desc[20] = RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY;
  struct rpma_mr_remote* rem = SENTINEL_PTR;
  ret = rpma_mr_remote_from_descriptor(desc, 21, &rem);
  check_ptr("mr_remote_from_descriptor(21 bytes)", ret, rem);
  if (ret == 0) {
    size_t size = 12345;
    ret = rpma_mr_remote_get_size(rem, &size);
    say_size("mr_remote_get_size", ret, size, 12345);
    int ft = SENTINEL_INT;
    ret = rpma_mr_remote_get_flush_type(rem, &ft);
    say_int("mr_remote_get_flush_type", ret, ft);
    size = 12345;
    ret = rpma_mr_remote_get_size(rem, NULL);
    check_ret("mr_remote_get_size(rem, NULL)", ret);
    ret = rpma_mr_remote_get_flush_type(rem, NULL);
    check_ret("mr_remote_get_flush_type(rem, NULL)", ret);
    /* every posting call with conn NULL and real remote/local-less arguments */
    check_ret("read(conn NULL)",
              rpma_read(NULL, NULL, 0, rem, 0, 8, RPMA_F_COMPLETION_ALWAYS, NULL));
    check_ret("write(conn NULL)",
              rpma_write(NULL, rem, 0, NULL, 0, 8, RPMA_F_COMPLETION_ALWAYS, NULL));
    check_ret("write_with_imm(conn NULL)",
              rpma_write_with_imm(NULL, rem, 0, NULL, 0, 8, RPMA_F_COMPLETION_ALWAYS, 1, NULL));
    check_ret("atomic_write(conn NULL)",
              rpma_atomic_write(NULL, rem, 0, eight, RPMA_F_COMPLETION_ALWAYS, NULL));
    check_ret("flush(conn NULL)", rpma_flush(NULL, rem, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY,
                                             RPMA_F_COMPLETION_ALWAYS, NULL));
    ret = rpma_mr_remote_delete(&rem);
    check_ptr("mr_remote_delete", ret, rem);
  }
  rem = SENTINEL_PTR;
  ret = rpma_mr_remote_from_descriptor(desc, sizeof desc, &rem);
  check_ptr("mr_remote_from_descriptor(24 bytes)", ret, rem);
  if (ret == 0) (void)rpma_mr_remote_delete(&rem);
  rem = SENTINEL_PTR;
  ret = rpma_mr_remote_from_descriptor(desc, 20, &rem);
  check_ptr("mr_remote_from_descriptor(20 bytes)", ret, rem);
  ret = rpma_mr_remote_from_descriptor(desc, 0, &rem);
  check_ptr("mr_remote_from_descriptor(0 bytes)", ret, rem);
  ret = rpma_mr_remote_from_descriptor(NULL, 21, &rem);
  check_ptr("mr_remote_from_descriptor(NULL, 21)", ret, rem);
  check_ret("mr_remote_from_descriptor(desc, 21, NULL)",
            rpma_mr_remote_from_descriptor(desc, 21, NULL));
  desc[20] = 0;
  ret = rpma_mr_remote_from_descriptor(desc, 21, &rem);
  check_ptr("mr_remote_from_descriptor(usage 0)", ret, rem);
  desc[20] = RPMA_MR_USAGE_READ_SRC;
  rem = SENTINEL_PTR;
  ret = rpma_mr_remote_from_descriptor(desc, 21, &rem);
  if (ret == 0) {
    int ft = SENTINEL_INT;
    ret = rpma_mr_remote_get_flush_type(rem, &ft);
    say_int("mr_remote_get_flush_type(usage READ_SRC)", ret, ft);
    (void)rpma_mr_remote_delete(&rem);
  } else {
    check_ptr("mr_remote_from_descriptor(usage READ_SRC)", ret, rem);
  }
  desc[20] = RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY |
             RPMA_MR_USAGE_RECV;
  rem = SENTINEL_PTR;
  ret = rpma_mr_remote_from_descriptor(desc, 21, &rem);
  if (ret == 0) {
    int ft = SENTINEL_INT;
    ret = rpma_mr_remote_get_flush_type(rem, &ft);
    say_int("mr_remote_get_flush_type(usage both flush types | RECV)", ret, ft);
    (void)rpma_mr_remote_delete(&rem);
  } else {
    check_ptr("mr_remote_from_descriptor(usage both flush types | RECV)", ret, rem);
  }
  size_t size = 12345;
  ret = rpma_mr_remote_get_size(NULL, &size);
  say_size("mr_remote_get_size(NULL, &size)", ret, size, 12345);
  int ft = SENTINEL_INT;
  ret = rpma_mr_remote_get_flush_type(NULL, &ft);
  say_int("mr_remote_get_flush_type(NULL, &type)", ret, ft);
  check_ret("mr_remote_delete(NULL)", rpma_mr_remote_delete(NULL));
  rem = NULL;
  ret = rpma_mr_remote_delete(&rem);
  check_ptr("mr_remote_delete(&NULL)", ret, rem);

  /* local regions without a peer */
  char buf[64];
  struct rpma_mr_local* mr = SENTINEL_PTR;
  ret = rpma_mr_reg(NULL, buf, sizeof buf, RPMA_MR_USAGE_READ_SRC, &mr);
  check_ptr("mr_reg(peer NULL)", ret, mr);
  check_ret("mr_reg(peer NULL, mr_ptr NULL)",
            rpma_mr_reg(NULL, buf, sizeof buf, RPMA_MR_USAGE_READ_SRC, NULL));
  check_ret("mr_dereg(NULL)", rpma_mr_dereg(NULL));
  mr = NULL;
  ret = rpma_mr_dereg(&mr);
  check_ptr("mr_dereg(&NULL)", ret, mr);
  check_ret("mr_get_descriptor(NULL, desc)", rpma_mr_get_descriptor(NULL, desc));
  size = 12345;
  ret = rpma_mr_get_descriptor_size(NULL, &size);
  say_size("mr_get_descriptor_size(NULL, &size)", ret, size, 12345);
  void* ptr = SENTINEL_PTR;
  ret = rpma_mr_get_ptr(NULL, &ptr);
  check_ptr("mr_get_ptr(NULL, &ptr)", ret, ptr);
  size = 12345;
  ret = rpma_mr_get_size(NULL, &size);
  say_size("mr_get_size(NULL, &size)", ret, size, 12345);

  /* posting calls, conn NULL, no regions */
  check_ret("read(NULL, all NULL, len 0)",
            rpma_read(NULL, NULL, 0, NULL, 0, 0, RPMA_F_COMPLETION_ALWAYS, NULL));
  check_ret("write(NULL, all NULL, len 0)",
            rpma_write(NULL, NULL, 0, NULL, 0, 0, RPMA_F_COMPLETION_ALWAYS, NULL));
  check_ret("send(NULL, src NULL, len 0)",
            rpma_send(NULL, NULL, 0, 0, RPMA_F_COMPLETION_ALWAYS, NULL));
  check_ret("send_with_imm(NULL, src NULL, len 0)",
            rpma_send_with_imm(NULL, NULL, 0, 0, RPMA_F_COMPLETION_ALWAYS, 1, NULL));
  check_ret("recv(NULL, dst NULL, len 0)", rpma_recv(NULL, NULL, 0, 0, NULL));
  check_ret("conn_req_recv(NULL, dst NULL, len 0)", rpma_conn_req_recv(NULL, NULL, 0, 0, NULL));
  check_ret("srq_recv(NULL, dst NULL, len 0)", rpma_srq_recv(NULL, NULL, 0, 0, NULL));

  /* completions, no objects */
  struct ibv_wc wc;
  int got = SENTINEL_INT;
  ret = rpma_cq_get_wc(NULL, 1, &wc, &got);
  say_int("cq_get_wc(NULL, 1, wc, &got)", ret, got);
  check_ret("cq_wait(NULL)", rpma_cq_wait(NULL));
  int fd = SENTINEL_INT;
  ret = rpma_cq_get_fd(NULL, &fd);
  say_fd("cq_get_fd(NULL, &fd)", ret, fd);
  struct rpma_cq* cq = SENTINEL_PTR;
  bool is_rcq = false;
  ret = rpma_conn_wait(NULL, 0, &cq, &is_rcq);
  check_ptr("conn_wait(NULL, 0, &cq, &is_rcq)", ret, cq);
  check_ret("conn_wait(NULL, 0, NULL, NULL)", rpma_conn_wait(NULL, 0, NULL, NULL));
  fd = SENTINEL_INT;
  ret = rpma_conn_get_compl_fd(NULL, &fd);
  say_fd("conn_get_compl_fd(NULL, &fd)", ret, fd);
  check_ret("conn_get_compl_fd(NULL, NULL)", rpma_conn_get_compl_fd(NULL, NULL));
}

/* ---- the server (child) ------------------------------------------------- */

static void tell(int fd, char c) {
  ssize_t n = write(fd, &c, 1);
  (void)n;
}

static char await(int fd) {
  char c = 0;
  if (!wait_readable(fd, WAIT_MS) || read(fd, &c, 1) != 1) return 0;
  return c;
}

static struct rpma_peer* make_peer(const char* addr) {
  struct ibv_context* ctx = NULL;
  struct rpma_peer* peer = NULL;
  int ret = rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx);
  if (ret == 0 && ctx != NULL) ret = rpma_peer_new(ctx, &peer);
  if (ret != 0 || peer == NULL) {
    say("peer", "cannot make one (ret=%s)", ret_name(ret));
    return NULL;
  }
  return peer;
}

static int next_event(struct rpma_conn* conn, int* ev) {
  int fd = -1;
  *ev = SENTINEL_INT;
  if (rpma_conn_get_event_fd(conn, &fd) != 0 || !wait_readable(fd, WAIT_MS)) return INT_MIN;
  return rpma_conn_next_event(conn, (enum rpma_conn_event*)ev);
}

static void say_event(const char* name, struct rpma_conn* conn) {
  int ev;
  int ret = next_event(conn, &ev);
  if (ret == INT_MIN)
    say(name, "no event within %d ms", WAIT_MS);
  else
    say(name, "ret=%s event=%s", ret_name(ret),
        ev == SENTINEL_INT ? "untouched" : rpma_utils_conn_event_2str((enum rpma_conn_event)ev));
}

static char server_memory[REGION];

static int server(const char* addr, int sync_fd) {
  side = "server";
  struct rpma_peer* peer = make_peer(addr);
  if (peer == NULL) {
    tell(sync_fd, 'F');
    return 1;
  }
  struct rpma_mr_local* mr = SENTINEL_PTR;
  int ret = rpma_mr_reg(peer, server_memory, REGION,
                        RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC |
                            RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY | RPMA_MR_USAGE_RECV,
                        &mr);
  say_ptr("mr_reg(WRITE_DST | READ_SRC | VISIBILITY | RECV)", ret, mr);
  struct rpma_ep* ep = SENTINEL_PTR;
  if (ret == 0) ret = rpma_ep_listen(peer, addr, PORT, &ep);
  if (ret != 0) {
    say_ret("ep_listen", ret);
    tell(sync_fd, 'F');
    if (mr != SENTINEL_PTR) (void)rpma_mr_dereg(&mr);
    (void)rpma_peer_delete(&peer);
    return 1;
  }
  tell(sync_fd, 'L');
  int ep_fd = -1;
  (void)rpma_ep_get_fd(ep, &ep_fd);
  struct rpma_conn_req* req = NULL;
  if (ep_fd >= 0 && wait_readable(ep_fd, WAIT_MS)) {
    ret = rpma_ep_next_conn_req(ep, NULL, &req);
    say_ret("ep_next_conn_req", ret);
  } else {
    say("ep_next_conn_req", "no request within %d ms", WAIT_MS);
  }
  struct rpma_conn* conn = NULL;
  if (req != NULL) {
    /* receives posted before accepting; and rpma_conn_req_recv's argument errors */
    say_ret("conn_req_recv(NULL, mr, 0, 64)", rpma_conn_req_recv(NULL, mr, 0, 64, NULL));
    say_ret("conn_req_recv(req, NULL, 0, 64)", rpma_conn_req_recv(req, NULL, 0, 64, NULL));
    for (uintptr_t i = 0; i < 3; ++i) {
      char name[64];
      snprintf(name, sizeof name, "conn_req_recv(req, mr, %u, 64)", (unsigned)(1024 + 64 * i));
      say_ret(name, rpma_conn_req_recv(req, mr, 1024 + 64 * i, 64, (void*)(101 + i)));
    }
    char desc[21];
    (void)rpma_mr_get_descriptor(mr, desc);
    struct rpma_conn_private_data pd = {desc, sizeof desc};
    ret = rpma_conn_req_connect(&req, &pd, &conn);
    say_ptr("conn_req_connect (the descriptor as private data)", ret, conn);
    if (ret != 0) conn = NULL;
  }
  if (conn != NULL) {
    say_event("next_event", conn);
    /* a connection without a shared channel; nothing has come yet */
    struct rpma_cq* cq = NULL;
    (void)rpma_conn_get_cq(conn, &cq);
    struct ibv_wc wc;
    memset(&wc, 0, sizeof wc);
    int got = SENTINEL_INT;
    ret = rpma_cq_get_wc(cq, 1, &wc, &got);
    say_int("cq_get_wc on an empty CQ", ret, got);
    int fd = SENTINEL_INT;
    ret = rpma_cq_get_fd(cq, &fd);
    say_fd("cq_get_fd", ret, fd);
    if (fd >= 0 && fd != SENTINEL_INT && set_nonblock(fd, 1) == 0)
      say_ret("cq_wait on a non-blocking fd, nothing pending", rpma_cq_wait(cq));
    struct rpma_cq* fired = SENTINEL_PTR;
    unsigned char is_rcq = SENTINEL_BYTE;
    ret = rpma_conn_wait(conn, 0, &fired, (bool*)&is_rcq);
    say("conn_wait without a shared channel", "ret=%s cq=%s is_rcq=%s", ret_name(ret),
        ptr_state(fired), is_rcq == SENTINEL_BYTE ? "untouched" : "set");
    fd = SENTINEL_INT;
    ret = rpma_conn_get_compl_fd(conn, &fd);
    say_fd("conn_get_compl_fd without a shared channel", ret, fd);
    tell(sync_fd, 'R');
    /* the client's three messages */
    for (int i = 0; i < 3; ++i) {
      memset(&wc, 0, sizeof wc);
      char name[32];
      snprintf(name, sizeof name, "receive %d", i + 1);
      if (next_wc(NULL, cq, &wc, name) != 0) break;
      say_wc(name, &wc);
    }
    say("received text", "%.8s|%.8s", server_memory + 1024, server_memory + 1088);
    say("write_with_imm placed", "%.8s", server_memory + 2048);
    say_event("next_event after the client disconnected", conn);
    say_ret("conn_disconnect", rpma_conn_disconnect(conn));
    ret = rpma_conn_delete(&conn);
    say_ptr("conn_delete", ret, conn);
  }
  ret = rpma_mr_dereg(&mr);
  say_ptr("mr_dereg", ret, mr);
  (void)rpma_ep_shutdown(&ep);
  (void)rpma_peer_delete(&peer);
  return 0;
}

/* ---- the client (parent) ------------------------------------------------ */

static char client_memory[REGION];

/* the local region's descriptor and getters (never the address or the key) */
static void say_local(struct rpma_mr_local* mr, void* buf, size_t len) {
  size_t n = 12345;
  int ret = rpma_mr_get_descriptor_size(mr, &n);
  say_size("mr_get_descriptor_size", ret, n, 12345);
  unsigned char desc[32];
  memset(desc, 0xee, sizeof desc);
  ret = rpma_mr_get_descriptor(mr, desc);
  uint64_t dlen = 0;
  for (int i = 0; i < 8; ++i) dlen |= (uint64_t)desc[8 + i] << (8 * i);
  say("mr_get_descriptor", "ret=%s length=%llu usage=%u byte21=%s", ret_name(ret),
      (unsigned long long)dlen, (unsigned)desc[20], desc[21] == 0xee ? "untouched" : "written");
  void* ptr = SENTINEL_PTR;
  ret = rpma_mr_get_ptr(mr, &ptr);
  say("mr_get_ptr", "ret=%s is the buffer=%s", ret_name(ret), ptr == buf ? "yes" : "no");
  n = 12345;
  ret = rpma_mr_get_size(mr, &n);
  say("mr_get_size", "ret=%s value=%zu registered=%zu", ret_name(ret), n, len);
  struct rpma_mr_remote* rem = SENTINEL_PTR;
  ret = rpma_mr_remote_from_descriptor(desc, 21, &rem);
  say_ptr("mr_remote_from_descriptor(own descriptor)", ret, rem);
  if (ret == 0) {
    n = 12345;
    ret = rpma_mr_remote_get_size(rem, &n);
    say_size("mr_remote_get_size(own)", ret, n, 12345);
    int ft = SENTINEL_INT;
    ret = rpma_mr_remote_get_flush_type(rem, &ft);
    say_int("mr_remote_get_flush_type(own)", ret, ft);
    (void)rpma_mr_remote_delete(&rem);
  }
}

static void registrations(struct rpma_peer* peer) {
  static char buf[REGION];
  struct rpma_mr_local* mr = SENTINEL_PTR;
  int ret = rpma_mr_reg(peer, NULL, 64, RPMA_MR_USAGE_READ_SRC, &mr);
  say_ptr("mr_reg(ptr NULL)", ret, mr);
  ret = rpma_mr_reg(peer, buf, 0, RPMA_MR_USAGE_READ_SRC, &mr);
  say_ptr("mr_reg(size 0)", ret, mr);
  ret = rpma_mr_reg(peer, buf, 64, 0, &mr);
  say_ptr("mr_reg(usage 0)", ret, mr);
  ret = rpma_mr_reg(peer, buf, 64, 1 << 8, &mr);
  say_ptr("mr_reg(usage 1 << 8)", ret, mr);
  ret = rpma_mr_reg(peer, buf, 64, RPMA_MR_USAGE_READ_SRC | (1 << 12), &mr);
  say_ptr("mr_reg(usage READ_SRC | 1 << 12)", ret, mr);
  say_ret("mr_reg(mr_ptr NULL)", rpma_mr_reg(peer, buf, 64, RPMA_MR_USAGE_READ_SRC, NULL));
  static const int usages[] = {
      RPMA_MR_USAGE_READ_SRC,
      RPMA_MR_USAGE_READ_DST,
      RPMA_MR_USAGE_WRITE_SRC,
      RPMA_MR_USAGE_WRITE_DST,
      RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY,
      RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT,
      RPMA_MR_USAGE_SEND,
      RPMA_MR_USAGE_RECV,
      0xff,
  };
  for (size_t i = 0; i < sizeof usages / sizeof usages[0]; ++i) {
    char name[64];
    snprintf(name, sizeof name, "mr_reg(usage %d, 100 bytes at +8)", usages[i]);
    mr = SENTINEL_PTR;
    ret = rpma_mr_reg(peer, buf + 8, 100, usages[i], &mr);
    say_ptr(name, ret, mr);
    if (ret != 0) continue;
    say_local(mr, buf + 8, 100);
    ret = rpma_mr_dereg(&mr);
    say_ptr("mr_dereg", ret, mr);
  }
  ret = rpma_mr_dereg(&mr);
  say_ptr("mr_dereg(&NULL)", ret, mr);
}

/* argument errors with a live connection: nothing reaches the wire */
static void argument_errors(struct rpma_conn* conn, struct rpma_mr_local* mr,
                            struct rpma_mr_remote* rem, struct rpma_mr_remote* no_flush,
                            struct rpma_cq* cq) {
  const int A = RPMA_F_COMPLETION_ALWAYS;
  char eight[8] = {0};
  say_ret("read(flags 0)", rpma_read(conn, mr, 0, rem, 0, 8, 0, NULL));
  say_ret("write(flags 0)", rpma_write(conn, rem, 0, mr, 0, 8, 0, NULL));
  say_ret("write_with_imm(flags 0)", rpma_write_with_imm(conn, rem, 0, mr, 0, 8, 0, 1, NULL));
  say_ret("atomic_write(flags 0)", rpma_atomic_write(conn, rem, 0, eight, 0, NULL));
  say_ret("flush(flags 0)", rpma_flush(conn, rem, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, 0, NULL));
  say_ret("send(flags 0)", rpma_send(conn, mr, 0, 8, 0, NULL));
  say_ret("send_with_imm(flags 0)", rpma_send_with_imm(conn, mr, 0, 8, 0, 1, NULL));

  say_ret("read(dst NULL, len 8)", rpma_read(conn, NULL, 0, rem, 0, 8, A, NULL));
  say_ret("read(src NULL, len 8)", rpma_read(conn, mr, 0, NULL, 0, 8, A, NULL));
  say_ret("read(both NULL, len 8)", rpma_read(conn, NULL, 0, NULL, 0, 8, A, NULL));
  say_ret("read(src NULL, len 0)", rpma_read(conn, mr, 0, NULL, 0, 0, A, NULL));
  say_ret("read(both NULL, dst_offset 8, len 0)", rpma_read(conn, NULL, 8, NULL, 0, 0, A, NULL));
  say_ret("write(dst NULL, len 8)", rpma_write(conn, NULL, 0, mr, 0, 8, A, NULL));
  say_ret("write(src NULL, len 8)", rpma_write(conn, rem, 0, NULL, 0, 8, A, NULL));
  say_ret("write(dst NULL, len 0)", rpma_write(conn, NULL, 0, mr, 0, 0, A, NULL));
  say_ret("write(both NULL, src_offset 8, len 0)", rpma_write(conn, NULL, 0, NULL, 8, 0, A, NULL));
  say_ret("write_with_imm(src NULL, len 8)",
          rpma_write_with_imm(conn, rem, 0, NULL, 0, 8, A, 1, NULL));
  say_ret("atomic_write(dst NULL)", rpma_atomic_write(conn, NULL, 0, eight, A, NULL));
  say_ret("atomic_write(src NULL)", rpma_atomic_write(conn, rem, 0, NULL, A, NULL));
  say_ret("atomic_write(offset 4)", rpma_atomic_write(conn, rem, 4, eight, A, NULL));
  say_ret("atomic_write(offset 1)", rpma_atomic_write(conn, rem, 1, eight, A, NULL));
  say_ret("flush(dst NULL)", rpma_flush(conn, NULL, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, A, NULL));
  say_ret("send(src NULL, len 8)", rpma_send(conn, NULL, 0, 8, A, NULL));
  say_ret("send(src NULL, offset 8)", rpma_send(conn, NULL, 8, 0, A, NULL));
  say_ret("send_with_imm(src NULL, len 8)", rpma_send_with_imm(conn, NULL, 0, 8, A, 1, NULL));
  say_ret("recv(dst NULL, len 8)", rpma_recv(conn, NULL, 0, 8, NULL));
  say_ret("recv(dst NULL, offset 8)", rpma_recv(conn, NULL, 8, 0, NULL));

  say_ret("flush(PERSISTENT, no direct write to PMem)",
          rpma_flush(conn, rem, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, A, NULL));
  say_ret("flush(VISIBILITY, region without flush usage)",
          rpma_flush(conn, no_flush, 0, 8, RPMA_FLUSH_TYPE_VISIBILITY, A, NULL));
  struct rpma_peer_cfg* pcfg = NULL;
  (void)rpma_peer_cfg_new(&pcfg);
  (void)rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true);
  say_ret("conn_apply_remote_peer_cfg(direct write)", rpma_conn_apply_remote_peer_cfg(conn, pcfg));
  say_ret("conn_apply_remote_peer_cfg(conn, NULL)", rpma_conn_apply_remote_peer_cfg(conn, NULL));
  say_ret("flush(PERSISTENT, direct write, region without PERSISTENT usage)",
          rpma_flush(conn, rem, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, A, NULL));
  say_ret("flush(PERSISTENT, direct write, region without flush usage)",
          rpma_flush(conn, no_flush, 0, 8, RPMA_FLUSH_TYPE_PERSISTENT, A, NULL));
  (void)rpma_peer_cfg_set_direct_write_to_pmem(pcfg, false);
  (void)rpma_conn_apply_remote_peer_cfg(conn, pcfg);
  (void)rpma_peer_cfg_delete(&pcfg);

  struct ibv_wc wc[2];
  int got = SENTINEL_INT;
  say_int("cq_get_wc(num_entries 0)", rpma_cq_get_wc(cq, 0, wc, &got), got);
  say_int("cq_get_wc(num_entries -1)", rpma_cq_get_wc(cq, -1, wc, &got), got);
  say_ret("cq_get_wc(num_entries 2, num_entries_got NULL)", rpma_cq_get_wc(cq, 2, wc, NULL));
  say_int("cq_get_wc(wc NULL)", rpma_cq_get_wc(cq, 1, NULL, &got), got);
  say_int("cq_get_wc(empty, num_entries 2)", rpma_cq_get_wc(cq, 2, wc, &got), got);
  say_ret("cq_get_wc(empty, num_entries 1, num_entries_got NULL)", rpma_cq_get_wc(cq, 1, wc, NULL));
}

static void client(const char* addr, int sync_fd) {
  side = "client";
  char c = await(sync_fd);
  say("server listening", "%s", c == 'L' ? "yes" : "no");
  if (c != 'L') return;
  struct rpma_peer* peer = make_peer(addr);
  if (peer == NULL) return;
  struct ibv_context* ctx = NULL;
  (void)rpma_utils_get_ibv_context(addr, RPMA_UTIL_IBV_CONTEXT_LOCAL, &ctx);
  int odp = SENTINEL_INT;
  int ret0 = rpma_utils_ibv_context_is_odp_capable(ctx, &odp);
  say_int("utils_ibv_context_is_odp_capable", ret0, odp);
  registrations(peer);

  struct rpma_mr_local* mr = SENTINEL_PTR;
  int ret = rpma_mr_reg(peer, client_memory, REGION,
                        RPMA_MR_USAGE_WRITE_SRC | RPMA_MR_USAGE_READ_DST | RPMA_MR_USAGE_SEND, &mr);
  say_ptr("mr_reg(WRITE_SRC | READ_DST | SEND)", ret, mr);
  if (ret != 0) {
    (void)rpma_peer_delete(&peer);
    return;
  }
  say_ret("mr_advise(mr, 0, 8, advice 0, flags 0)", rpma_mr_advise(mr, 0, 8, 0, 0));

  /* a connection with a shared completion channel */
  struct rpma_conn_cfg* cfg = NULL;
  (void)rpma_conn_cfg_new(&cfg);
  (void)rpma_conn_cfg_set_compl_channel(cfg, true);
  struct rpma_conn_req* req = NULL;
  struct rpma_conn* conn = NULL;
  ret = rpma_conn_req_new(peer, addr, PORT, cfg, &req);
  if (ret == 0) ret = rpma_conn_req_connect(&req, NULL, &conn);
  say_ret("conn_req_new + conn_req_connect (shared channel)", ret);
  (void)rpma_conn_cfg_delete(&cfg);
  if (ret != 0) {
    (void)rpma_mr_dereg(&mr);
    (void)rpma_peer_delete(&peer);
    return;
  }
  say_event("next_event", conn);
  struct rpma_conn_private_data pd = {NULL, 0};
  (void)rpma_conn_get_private_data(conn, &pd);
  struct rpma_mr_remote* rem = SENTINEL_PTR;
  ret = rpma_mr_remote_from_descriptor(pd.ptr, pd.len, &rem);
  say_ptr("mr_remote_from_descriptor(the server's)", ret, rem);
  if (ret != 0) rem = NULL; /* untouched on failure: the deletes below need NULL */
  unsigned char nf_desc[21];
  memset(nf_desc, 0, sizeof nf_desc);
  if (pd.ptr != NULL && pd.len >= 21) memcpy(nf_desc, pd.ptr, 21);
  nf_desc[20] = RPMA_MR_USAGE_WRITE_DST | RPMA_MR_USAGE_READ_SRC;
  struct rpma_mr_remote* no_flush = NULL;
  (void)rpma_mr_remote_from_descriptor(nf_desc, 21, &no_flush);
  if (ret == 0) {
    size_t n = 12345;
    ret = rpma_mr_remote_get_size(rem, &n);
    say_size("mr_remote_get_size(the server's)", ret, n, 12345);
    int ft = SENTINEL_INT;
    ret = rpma_mr_remote_get_flush_type(rem, &ft);
    say_int("mr_remote_get_flush_type(the server's)", ret, ft);
  }
  struct rpma_cq* cq = NULL;
  (void)rpma_conn_get_cq(conn, &cq);
  struct rpma_cq* rcq = SENTINEL_PTR;
  ret = rpma_conn_get_rcq(conn, &rcq);
  say_ptr("conn_get_rcq (rcq_size 0)", ret, rcq);
  say_ret("cq_wait with a shared channel", rpma_cq_wait(cq));
  int cfd = SENTINEL_INT;
  ret = rpma_conn_get_compl_fd(conn, &cfd);
  say_fd("conn_get_compl_fd with a shared channel", ret, cfd);
  int fd = SENTINEL_INT;
  ret = rpma_cq_get_fd(cq, &fd);
  say("cq_get_fd with a shared channel", "ret=%s the shared fd=%s", ret_name(ret),
      fd == cfd ? "yes" : "no");
  if (cfd >= 0 && cfd != SENTINEL_INT && set_nonblock(cfd, 1) == 0) {
    struct rpma_cq* fired = SENTINEL_PTR;
    ret = rpma_conn_wait(conn, 0, &fired, NULL);
    say_ptr("conn_wait on a non-blocking fd, nothing pending", ret, fired);
  }
  say_ret("conn_wait(conn, 0, NULL, NULL)", rpma_conn_wait(conn, 0, NULL, NULL));

  if (rem != SENTINEL_PTR && rem != NULL) {
    const int A = RPMA_F_COMPLETION_ALWAYS;
    /* write, flush (VISIBILITY), read back */
    memcpy(client_memory, "hello-rdma", 11);
    say_ret("write(rem 0, mr 0, 11)", rpma_write(conn, rem, 0, mr, 0, 11, A, (void*)1));
    expect_wc(conn, cq, "wc(write)");
    say_ret("flush(VISIBILITY, rem 0, 11)",
            rpma_flush(conn, rem, 0, 11, RPMA_FLUSH_TYPE_VISIBILITY, A, (void*)2));
    expect_wc(conn, cq, "wc(flush)");
    say_ret("read(mr 512, rem 0, 11)", rpma_read(conn, mr, 512, rem, 0, 11, A, (void*)3));
    expect_wc(conn, cq, "wc(read)");
    say("read back", "%.11s", client_memory + 512);
    /* atomic write, then a flush, then read back */
    say_ret("atomic_write(rem 16)", rpma_atomic_write(conn, rem, 16, "ATOMIC8!", A, (void*)4));
    expect_wc(conn, cq, "wc(atomic_write)");
    say_ret("flush(VISIBILITY, rem 16, 8)",
            rpma_flush(conn, rem, 16, 8, RPMA_FLUSH_TYPE_VISIBILITY, A, (void*)5));
    expect_wc(conn, cq, "wc(flush after atomic_write)");
    say_ret("read(mr 600, rem 16, 8)", rpma_read(conn, mr, 600, rem, 16, 8, A, (void*)6));
    expect_wc(conn, cq, "wc(read after atomic_write)");
    say("atomic write placed", "%.8s", client_memory + 600);
    /* zero-length with both regions NULL */
    say_ret("read(both NULL, len 0)", rpma_read(conn, NULL, 0, NULL, 0, 0, A, (void*)7));
    expect_wc(conn, cq, "wc(read len 0)");
    say_ret("write(both NULL, len 0)", rpma_write(conn, NULL, 0, NULL, 0, 0, A, (void*)8));
    expect_wc(conn, cq, "wc(write len 0)");
    /* completion on error only: nothing on success; the signaled read comes first */
    say_ret("write(ON_ERROR)",
            rpma_write(conn, rem, 32, mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR, (void*)9));
    say_ret("read(ALWAYS) after it", rpma_read(conn, mr, 700, rem, 32, 8, A, (void*)10));
    expect_wc(conn, cq, "wc(after an ON_ERROR write)");
    struct ibv_wc wc;
    say_ret("cq_get_wc on an empty CQ", rpma_cq_get_wc(cq, 1, &wc, NULL));

    /* messages: the server has posted three receives */
    c = await(sync_fd);
    say("server ready for messages", "%s", c == 'R' ? "yes" : "no");
    memcpy(client_memory + 64, "ping", 5);
    say_ret("send(mr 64, 5)", rpma_send(conn, mr, 64, 5, A, (void*)11));
    expect_wc(conn, cq, "wc(send)");
    memcpy(client_memory + 80, "pong-imm", 9);
    say_ret("send_with_imm(mr 80, 9, imm 0xabcd)",
            rpma_send_with_imm(conn, mr, 80, 9, A, 0xabcd, (void*)12));
    expect_wc(conn, cq, "wc(send_with_imm)");
    memcpy(client_memory + 96, "wimm-42", 8);
    say_ret("write_with_imm(rem 2048, mr 96, 8, imm 42)",
            rpma_write_with_imm(conn, rem, 2048, mr, 96, 8, A, 42, (void*)13));
    expect_wc(conn, cq, "wc(write_with_imm)");

    argument_errors(conn, mr, rem, no_flush, cq);

    /*
     * Last, as each may break the connection: the deliberate differences of docs/
     * compatibility.md, "Data path: ranges are checked before the wire" (librpma posts an
     * unknown flush type and a range past the region; arpma refuses both), and between them a
     * remote access error, the same in both.
     */
    say_ret("flush(unknown type 7, ON_ERROR)", rpma_flush(conn, rem, 0, 8, (enum rpma_flush_type)7,
                                                          RPMA_F_COMPLETION_ON_ERROR, (void*)14));
    /* a remote access error: the server's region with another rkey (breaks the QP) */
    unsigned char forged[21];
    memcpy(forged, nf_desc, 21);
    forged[20] = RPMA_MR_USAGE_WRITE_DST;
    for (int i = 16; i < 20; ++i) forged[i] ^= 0x5a;
    struct rpma_mr_remote* wrong = NULL;
    (void)rpma_mr_remote_from_descriptor(forged, 21, &wrong);
    say_ret("write(forged rkey, ON_ERROR)",
            rpma_write(conn, wrong, 0, mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR, (void*)16));
    struct ibv_wc ew;
    memset(&ew, 0, sizeof ew);
    /* on error only status and wr_id are defined */
    if (next_wc(conn, cq, &ew, "wc(forged rkey)") == 0)
      say("wc(forged rkey)", "status=%s wr_id=%llu", ibv_wc_status_str(ew.status),
          (unsigned long long)ew.wr_id);
    (void)rpma_mr_remote_delete(&wrong);
    say_ret("write(rem 4092, 8 bytes: past the remote region, ON_ERROR)",
            rpma_write(conn, rem, REGION - 4, mr, 0, 8, RPMA_F_COMPLETION_ON_ERROR, (void*)15));
  }
  say_ret("conn_disconnect", rpma_conn_disconnect(conn));
  say_event("next_event after disconnecting", conn);
  ret = rpma_conn_delete(&conn);
  say_ptr("conn_delete", ret, conn);
  (void)rpma_mr_remote_delete(&no_flush);
  ret = rpma_mr_remote_delete(&rem);
  say_ptr("mr_remote_delete", ret, rem);
  ret = rpma_mr_dereg(&mr);
  say_ptr("mr_dereg", ret, mr);
  ret = rpma_peer_delete(&peer);
  say_ptr("peer_delete", ret, peer);
}

static void device_section(const char* addr) {
  char path[] = "/tmp/compat_datapath_server_XXXXXX";
  int out = mkstemp(path);
  int sync[2];
  if (out < 0 || pipe(sync) != 0) {
    check("device section", "aborted: no temporary file or pipe");
    return;
  }
  unlink(path);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    check("device section", "aborted: fork failed");
    return;
  }
  if (pid == 0) {
    alarm(60); /* the last resort: nothing here may wait that long */
    close(sync[0]);
    dup2(out, 1);
    close(out);
    int rc = server(addr, sync[1]);
    fflush(stdout);
    _exit(rc);
  }
  close(sync[1]);
  alarm(90);
  client(addr, sync[0]);
  close(sync[0]);

  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 300 && (got = waitpid(pid, &status, WNOHANG)) == 0; ++i) {
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  if (got == 0) {
    kill(pid, SIGKILL);
    (void)waitpid(pid, &status, 0);
  }
  alarm(0);

  FILE* f = fdopen(out, "r");
  if (f != NULL) {
    rewind(f);
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
      fputs(line, stdout);
      ++compat_checks;
    }
    fclose(f);
  }
  side = "";
  if (WIFEXITED(status))
    check("server: exit", "status %d", WEXITSTATUS(status));
  else
    check("server: exit", "signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : -1);
}

int main(int argc, char* argv[]) {
  const char* pos[3] = {NULL, NULL, NULL};
  int npos = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--device-names") == 0) continue;
    if (npos == 3) {
      fprintf(stderr, "usage: %s [ADDR SILENT NO_ROUTE [--device-names]]\n", argv[0]);
      return 2;
    }
    pos[npos++] = argv[i];
  }
  if (npos != 0 && npos != 3) {
    fprintf(stderr, "usage: %s [ADDR SILENT NO_ROUTE [--device-names]]\n", argv[0]);
    return 2;
  }
  no_device();
  if (npos == 3)
    device_section(pos[0]);
  else
    check("device section", "skipped (no address given)");
  return compat_end("compat_datapath");
}
