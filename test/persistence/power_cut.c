/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * power_cut.c -- both sides of the power-cut test (test/vm/power-cut.sh,
 * docs/reliability.md), librpma's API only.
 *
 * The server maps PATH (the guest's virtio disk, /dev/vda) shared, registers
 * it and hands its descriptor to one client. The client writes numbered
 * records of RECORD_SIZE bytes, one after the other, and after each one is
 * persistent prints "flushed N" (stdout, line-buffered: the host reads it at
 * once). The host kills the server's guest at a random moment and checks the
 * disk image (test/persistence/check_records.py): every record reported
 * flushed must be there, intact.
 *
 *   power_cut server <addr> <port> <path> msync|gpspm
 *   power_cut client <addr> <port> msync|gpspm|none <count>
 *
 * msync: rpma_flush(RPMA_FLUSH_TYPE_PERSISTENT) (the soft provider msyncs
 * the range on the server). gpspm: librpma's general-purpose server
 * persistency method, as its example 09: after the write the client sends
 * a persist request, the server msyncs the range and answers. none: the
 * control run, writes only ("written N" after each write's completion).
 */

#define _POSIX_C_SOURCE 200809L

#include "../../examples/datapath/common.h"

#include <librpma.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RECORD_SIZE 512
#define RECORD_MAGIC 0x4152504d41524543ULL /* "ARPMAREC" */

/* A GPSPM persist request (client -> server) and its answer: the range. */
struct persist_msg {
  uint64_t offset;
  uint64_t len; /* 0: the client is done */
};

static void fill_record(unsigned char* rec, uint64_t n) {
  const uint64_t magic = RECORD_MAGIC;
  memcpy(rec, &magic, sizeof(magic));
  memcpy(rec + 8, &n, sizeof(n));
  for (size_t i = 16; i < RECORD_SIZE; ++i) rec[i] = (unsigned char)((n * 31 + i) & 0xff);
}

static int usage(void) {
  fprintf(stderr,
          "usage: power_cut server <addr> <port> <path> msync|gpspm\n"
          "       power_cut client <addr> <port> msync|gpspm|none <count>\n");
  return 2;
}

/* ---------------------------------------------------------------- server */

/* Makes [base + offset, +len) persistent: 0 or -1. An RNIC writes into the
 * pinned pages behind the page cache's back, so a page written back once is
 * clean to msync however often the NIC wrote it since: a store through our
 * mapping marks every page of the range dirty first (a DAX mapping of real
 * persistent memory would need neither). The store is an atomic OR with 0:
 * it writes without changing a byte the NIC may be writing beside it. */
static int persist(unsigned char* base, uint64_t offset, uint64_t len) {
  const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  const uint64_t first = offset & ~(page - 1);
  for (uint64_t p = first; p < offset + len; p += page)
    (void)__atomic_fetch_or(base + p, (unsigned char)0, __ATOMIC_RELAXED);
  if (msync(base + first, offset + len - first, MS_SYNC) == 0) return 0;
  perror("server: msync");
  return -1;
}

/* Answers persist requests until the client says it is done. A receive is
 * always posted (the first one with the accept) before the client can send. */
static int serve_gpspm(struct rpma_conn* conn, struct rpma_mr_local* msg_mr,
                       struct persist_msg* msgs, unsigned char* base) {
  struct rpma_cq* cq = NULL;
  int ret = rpma_conn_get_cq(conn, &cq);
  if (ret) return dp_fail("server", "rpma_conn_get_cq", ret);
  for (;;) {
    struct ibv_wc wc;
    do {
      if (dp_wait_wc("server", "waiting for a persist request", cq, &wc)) return -1;
    } while (wc.opcode != IBV_WC_RECV);
    if (msgs[0].len == 0) return 0;
    if (persist(base, msgs[0].offset, msgs[0].len)) return -1;
    msgs[1] = msgs[0];
    ret = rpma_recv(conn, msg_mr, 0, sizeof(msgs[0]), NULL);
    if (!ret)
      ret = rpma_send(conn, msg_mr, sizeof(msgs[0]), sizeof(msgs[0]), RPMA_F_COMPLETION_ON_ERROR,
                      NULL);
    if (ret) return dp_fail("server", "answering", ret);
  }
}

static int run_server(const char* addr, const char* port, const char* path, int gpspm) {
  int fd = open(path, O_RDWR);
  if (fd < 0) return perror("server: open"), -1;
  const off_t size = lseek(fd, 0, SEEK_END);
  unsigned char* base =
      size > 0 ? mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (base == MAP_FAILED) return perror("server: mmap"), -1;

  static struct persist_msg msgs[2]; /* [0] request in, [1] answer out */
  struct rpma_peer* peer = NULL;
  struct rpma_mr_local* mr = NULL;
  struct rpma_mr_local* msg_mr = NULL;
  struct rpma_ep* ep = NULL;
  struct rpma_conn_req* req = NULL;
  struct rpma_conn* conn = NULL;
  char desc[21]; /* rpma_mr_get_descriptor_size() */
  int failed = 1;
  int usage_flags = RPMA_MR_USAGE_WRITE_DST | (gpspm ? RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY
                                                     : RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
  if (dp_peer_new("server", addr, 1, &peer)) goto out;
  int ret = rpma_mr_reg(peer, base, (size_t)size, usage_flags, &mr);
  if (!ret)
    ret = rpma_mr_reg(peer, msgs, sizeof(msgs), RPMA_MR_USAGE_RECV | RPMA_MR_USAGE_SEND, &msg_mr);
  if (!ret) ret = rpma_mr_get_descriptor(mr, desc);
  if (ret) {
    dp_fail("server", "registering", ret);
    goto out;
  }
  if (dp_listen("server", peer, addr, port, &ep) || dp_next_req("server", ep, NULL, &req)) goto out;
  ret = gpspm ? rpma_conn_req_recv(req, msg_mr, 0, sizeof(msgs[0]), NULL) : 0;
  if (ret) {
    dp_fail("server", "rpma_conn_req_recv", ret);
    (void)rpma_conn_req_delete(&req);
    goto out;
  }
  if (dp_accept("server", &req, desc, sizeof(desc), &conn)) goto out;
  printf("server: %lld bytes of %s registered, serving (%s)\n", (long long)size, path,
         gpspm ? "gpspm" : "msync");
  failed = gpspm ? serve_gpspm(conn, msg_mr, msgs, base) != 0 : 0;
  if (dp_wait_closed("server", "client", &conn)) failed = 1;
out:
  if (conn) (void)rpma_conn_delete(&conn);
  if (ep) (void)rpma_ep_shutdown(&ep);
  if (msg_mr) (void)rpma_mr_dereg(&msg_mr);
  if (mr) (void)rpma_mr_dereg(&mr);
  if (peer) (void)rpma_peer_delete(&peer);
  munmap(base, (size_t)size);
  printf("server: %s\n", failed ? "FAILED" : "done");
  return failed ? -1 : 0;
}

/* ---------------------------------------------------------------- client */

enum mode { MODE_MSYNC, MODE_GPSPM, MODE_NONE };

struct client {
  struct rpma_conn* conn;
  struct rpma_mr_remote* remote;
  struct rpma_mr_local* rec_mr;
  struct rpma_mr_local* msg_mr;
  struct rpma_cq* cq;
  struct persist_msg* msgs; /* [0] request out, [1] answer in */
};

/* Writes record n and makes it persistent as `mode` says: 0 or -1. */
static int put_record(struct client* c, enum mode mode, uint64_t n) {
  const size_t offset = (size_t)n * RECORD_SIZE;
  const int write_flags = mode == MODE_NONE ? RPMA_F_COMPLETION_ALWAYS : RPMA_F_COMPLETION_ON_ERROR;
  int ret = rpma_write(c->conn, c->remote, offset, c->rec_mr, 0, RECORD_SIZE, write_flags, NULL);
  if (ret) return dp_fail("client", "rpma_write", ret);
  if (mode == MODE_MSYNC)
    ret = rpma_flush(c->conn, c->remote, offset, RECORD_SIZE, RPMA_FLUSH_TYPE_PERSISTENT,
                     RPMA_F_COMPLETION_ALWAYS, NULL);
  if (!ret && mode == MODE_GPSPM) {
    c->msgs[0].offset = offset;
    c->msgs[0].len = RECORD_SIZE;
    ret = rpma_recv(c->conn, c->msg_mr, sizeof(c->msgs[0]), sizeof(c->msgs[0]), NULL);
    if (!ret)
      ret = rpma_send(c->conn, c->msg_mr, 0, sizeof(c->msgs[0]), RPMA_F_COMPLETION_ON_ERROR, NULL);
  }
  if (ret) return dp_fail("client", "asking for persistence", ret);
  struct ibv_wc wc;
  do {
    if (dp_wait_wc("client", "persisting", c->cq, &wc)) return -1;
  } while (mode == MODE_GPSPM && wc.opcode != IBV_WC_RECV);
  return 0;
}

static int write_records(struct client* c, enum mode mode, uint64_t count, unsigned char* rec) {
  for (uint64_t n = 0; n < count; ++n) {
    fill_record(rec, n);
    if (put_record(c, mode, n)) return -1;
    printf("%s %llu\n", mode == MODE_NONE ? "written" : "flushed", (unsigned long long)n);
  }
  if (mode != MODE_GPSPM) return 0;
  c->msgs[0].len = 0; /* done */
  int ret = rpma_send(c->conn, c->msg_mr, 0, sizeof(c->msgs[0]), RPMA_F_COMPLETION_ALWAYS, NULL);
  struct ibv_wc wc;
  if (ret) return dp_fail("client", "rpma_send", ret);
  return dp_wait_wc("client", "sending done", c->cq, &wc);
}

static int run_client(const char* addr, const char* port, enum mode mode, uint64_t count) {
  static unsigned char rec[RECORD_SIZE];
  static struct persist_msg msgs[2];
  struct client c = {.msgs = msgs};
  struct rpma_peer* peer = NULL;
  struct rpma_peer_cfg* pcfg = NULL;
  int failed = 1;
  if (dp_peer_new("client", addr, 0, &peer)) goto out;
  int ret = rpma_mr_reg(peer, rec, sizeof(rec), RPMA_MR_USAGE_WRITE_SRC, &c.rec_mr);
  if (!ret)
    ret = rpma_mr_reg(peer, msgs, sizeof(msgs), RPMA_MR_USAGE_SEND | RPMA_MR_USAGE_RECV, &c.msg_mr);
  if (ret) {
    dp_fail("client", "rpma_mr_reg", ret);
    goto out;
  }
  if (dp_connect("client", peer, addr, port, NULL, &c.conn) ||
      dp_server_region("client", c.conn, &c.remote))
    goto out;
  /* The server's memory is persistent once msynced: rpma_flush may ask for it. */
  ret = rpma_peer_cfg_new(&pcfg);
  if (!ret) ret = rpma_peer_cfg_set_direct_write_to_pmem(pcfg, true);
  if (!ret) ret = rpma_conn_apply_remote_peer_cfg(c.conn, pcfg);
  if (!ret) ret = rpma_conn_get_cq(c.conn, &c.cq);
  if (ret) {
    dp_fail("client", "configuring the connection", ret);
    goto out;
  }
  failed = write_records(&c, mode, count, rec) != 0;
  if (dp_disconnect("client", &c.conn)) failed = 1;
out:
  if (pcfg) (void)rpma_peer_cfg_delete(&pcfg);
  if (c.remote) (void)rpma_mr_remote_delete(&c.remote);
  if (c.conn) (void)rpma_conn_delete(&c.conn);
  if (c.msg_mr) (void)rpma_mr_dereg(&c.msg_mr);
  if (c.rec_mr) (void)rpma_mr_dereg(&c.rec_mr);
  if (peer) (void)rpma_peer_delete(&peer);
  printf("client: %s\n", failed ? "FAILED" : "done");
  return failed ? -1 : 0;
}

int main(int argc, char* argv[]) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 6 && strcmp(argv[1], "server") == 0) {
    const int gpspm = strcmp(argv[5], "gpspm") == 0;
    if (!gpspm && strcmp(argv[5], "msync") != 0) return usage();
    return run_server(argv[2], argv[3], argv[4], gpspm) ? EXIT_FAILURE : EXIT_SUCCESS;
  }
  if (argc == 6 && strcmp(argv[1], "client") == 0) {
    enum mode mode = MODE_NONE;
    if (strcmp(argv[4], "msync") == 0)
      mode = MODE_MSYNC;
    else if (strcmp(argv[4], "gpspm") == 0)
      mode = MODE_GPSPM;
    else if (strcmp(argv[4], "none") != 0)
      return usage();
    const long long count = atoll(argv[5]);
    if (count <= 0) return usage();
    return run_client(argv[2], argv[3], mode, (uint64_t)count) ? EXIT_FAILURE : EXIT_SUCCESS;
  }
  return usage();
}
