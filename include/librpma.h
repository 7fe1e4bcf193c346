/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * librpma.h -- the C API of arpma: librpma 1.3's API (same names, types,
 * values and error codes) implemented on arpma's asynchronous core. Each
 * blocking call runs a private event loop of the calling thread until its
 * operation completes.
 *
 * Every function returns 0 on success or a negative RPMA_E_* code. On failure
 * no out-parameter is written. Checking that the returned value is
 * non-negative is the only programmatic way to tell success; the cause of a
 * provider failure (its errno) is written to the log.
 *
 * This header grows with the implementation: a function is declared here only
 * once arpma implements it.
 */

#ifndef LIBRPMA_H
#define LIBRPMA_H 1

/* NOLINTBEGIN(modernize-deprecated-headers): a C header, also compiled as C11 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* librpma's header includes it, and librpma programs use stderr and fprintf through it. */
#include <stdio.h>
/* NOLINTEND(modernize-deprecated-headers) */

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes ------------------------------------------------------- */

#define RPMA_W_WAIT_FOR_COMPLETION (1)

#define RPMA_E_UNKNOWN (-100000)         /* Unknown error */
#define RPMA_E_NOSUPP (-100001)          /* Not supported */
#define RPMA_E_PROVIDER (-100002)        /* Provider error occurred */
#define RPMA_E_NOMEM (-100003)           /* Out of memory */
#define RPMA_E_INVAL (-100004)           /* Invalid argument */
#define RPMA_E_NO_COMPLETION (-100005)   /* No next completion available */
#define RPMA_E_NO_EVENT (-100006)        /* No next event available */
#define RPMA_E_AGAIN (-100007)           /* Temporary error */
#define RPMA_E_SHARED_CHANNEL (-100008)  /* Completion channel is shared */
#define RPMA_E_NOT_SHARED_CHNL (-100009) /* Completion channel is not shared */

#define RPMA_DEFAULT_TIMEOUT_MS 1000

/* ---- opaque types ------------------------------------------------------ */

struct rpma_peer;
struct rpma_conn_cfg;
struct rpma_conn_req;
struct rpma_srq;
struct rpma_srq_cfg;
struct rpma_peer_cfg;
struct rpma_ep;
struct rpma_conn;
struct rpma_cq;
struct rpma_mr_local;
struct rpma_mr_remote;

/* ---- utils ------------------------------------------------------------- */

enum rpma_util_ibv_context_type {
  RPMA_UTIL_IBV_CONTEXT_LOCAL,  /* lookup for a local device */
  RPMA_UTIL_IBV_CONTEXT_REMOTE, /* lookup for a remote device */
};

/*
 * rpma_utils_get_ibv_context -- obtain an RDMA device context by IP address
 *
 * Finds the device that owns addr: a LOCAL address is bound, a REMOTE one is
 * resolved (up to 1000 ms, blocking). With the verbs provider the returned
 * context is rdma-core's; with the soft provider it is a handle that arpma
 * understands (its verbs operations fail with EOPNOTSUPP).
 *
 * RETURN VALUE: 0 and *ibv_ctx_ptr set, or:
 * - RPMA_E_INVAL - addr or ibv_ctx_ptr is NULL, or type is unknown
 * - RPMA_E_NOMEM - out of memory
 * - RPMA_E_PROVIDER - no device owns the address (the cause is logged with
 *   its errno), or a provider call failed
 */
int rpma_utils_get_ibv_context(const char* addr, enum rpma_util_ibv_context_type type,
                               struct ibv_context** ibv_ctx_ptr);

/* ---- peer -------------------------------------------------------------- */

/*
 * rpma_peer_new -- create a peer object
 *
 * Allocates a protection domain on ibv_ctx.
 *
 * RETURN VALUE: 0 and *peer_ptr set, or:
 * - RPMA_E_INVAL - ibv_ctx or peer_ptr is NULL, or ibv_ctx is not a device
 *   context that any provider of arpma handed out
 * - RPMA_E_NOMEM - out of memory (also when the PD allocation fails with ENOMEM)
 * - RPMA_E_PROVIDER - the PD allocation failed otherwise
 * C++: arpma::peer::create().
 */
int rpma_peer_new(struct ibv_context* ibv_ctx, struct rpma_peer** peer_ptr);

/*
 * rpma_peer_delete -- delete a peer object
 *
 * Frees the peer and sets *peer_ptr to NULL, also when releasing the PD
 * fails. A PD still used by connection requests is released with the last of
 * them (see docs/compatibility.md).
 *
 * RETURN VALUE: 0 (also when *peer_ptr is NULL), or:
 * - RPMA_E_INVAL - peer_ptr is NULL
 * - RPMA_E_PROVIDER - deallocating the PD failed
 */
int rpma_peer_delete(struct rpma_peer** peer_ptr);

/* ---- connection configuration ----------------------------------------- */

/*
 * rpma_conn_cfg_new -- create a connection configuration object with the
 * defaults: timeout 1000 ms, CQ size 10, RCQ size 0 (no receive CQ), SQ size
 * 10, RQ size 10, completion channel not shared, no SRQ.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (cfg_ptr NULL), RPMA_E_NOMEM.
 */
int rpma_conn_cfg_new(struct rpma_conn_cfg** cfg_ptr);

/*
 * rpma_conn_cfg_delete -- free a configuration and set *cfg_ptr to NULL.
 *
 * RETURN VALUE: 0 (also when *cfg_ptr is NULL), or RPMA_E_INVAL (cfg_ptr NULL).
 */
int rpma_conn_cfg_delete(struct rpma_conn_cfg** cfg_ptr);

/*
 * rpma_conn_cfg_set_timeout / rpma_conn_cfg_get_timeout -- address and route
 * resolution timeout of rpma_conn_req_new, in milliseconds (each phase).
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL when cfg (or timeout_ms for the getter) is
 * NULL or timeout_ms < 0.
 */
int rpma_conn_cfg_set_timeout(struct rpma_conn_cfg* cfg, int timeout_ms);
int rpma_conn_cfg_get_timeout(const struct rpma_conn_cfg* cfg, int* timeout_ms);

/*
 * rpma_conn_cfg_set_cq_size / _get_cq_size -- depth of the main CQ.
 * rpma_conn_cfg_set_rcq_size / _get_rcq_size -- depth of the receive CQ
 *   (0: no separate receive CQ).
 * rpma_conn_cfg_set_sq_size / _get_sq_size -- send queue depth of the QP.
 * rpma_conn_cfg_set_rq_size / _get_rq_size -- receive queue depth of the QP.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL when cfg or the out-pointer is NULL.
 */
int rpma_conn_cfg_set_cq_size(struct rpma_conn_cfg* cfg, uint32_t cq_size);
int rpma_conn_cfg_get_cq_size(const struct rpma_conn_cfg* cfg, uint32_t* cq_size);
int rpma_conn_cfg_set_rcq_size(struct rpma_conn_cfg* cfg, uint32_t rcq_size);
int rpma_conn_cfg_get_rcq_size(const struct rpma_conn_cfg* cfg, uint32_t* rcq_size);
int rpma_conn_cfg_set_sq_size(struct rpma_conn_cfg* cfg, uint32_t sq_size);
int rpma_conn_cfg_get_sq_size(const struct rpma_conn_cfg* cfg, uint32_t* sq_size);
int rpma_conn_cfg_set_rq_size(struct rpma_conn_cfg* cfg, uint32_t rq_size);
int rpma_conn_cfg_get_rq_size(const struct rpma_conn_cfg* cfg, uint32_t* rq_size);

/*
 * rpma_conn_cfg_set_compl_channel / _get_compl_channel -- whether the main
 * CQ and the receive CQ share one completion channel.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL when cfg or the out-pointer is NULL.
 */
int rpma_conn_cfg_set_compl_channel(struct rpma_conn_cfg* cfg, bool shared);
int rpma_conn_cfg_get_compl_channel(const struct rpma_conn_cfg* cfg, bool* shared);

/*
 * rpma_conn_cfg_set_srq / _get_srq -- the shared receive queue connections
 * made with cfg use (rpma_srq_new). When the SRQ has its own receive CQ, a
 * connection's receives complete there and it gets no receive CQ of its own
 * (rpma_conn_get_rcq: NULL, whatever rcq_size says); with a shared
 * completion channel that is RPMA_E_INVAL at request creation. Each
 * connection keeps the SRQ alive until rpma_conn_delete.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL when cfg, srq (setter) or srq_ptr
 * (getter) is NULL.
 */
int rpma_conn_cfg_set_srq(struct rpma_conn_cfg* cfg, struct rpma_srq* srq);
int rpma_conn_cfg_get_srq(const struct rpma_conn_cfg* cfg, struct rpma_srq** srq_ptr);

/* ---- connection request ------------------------------------------------ */

/*
 * rpma_conn_req_new -- create a new outgoing connection request object using
 * reliable, connection-oriented and message-based (RDMA_PS_TCP) QP
 * communication.
 *
 * Resolves addr (numeric IPv4/IPv6 or a host name) and port, then the route,
 * each within the cfg timeout, and creates the completion channel(s), the CQ,
 * the receive CQ (when its size is > 0) and the QP. cfg == NULL means the
 * defaults of rpma_conn_cfg_new. Blocks until done; internally the operation
 * is arpma's asynchronous one, run on the calling thread's private loop. The
 * request's id has an event channel of its own, which the connection later
 * reports as its event fd.
 *
 * RETURN VALUE: 0 and *req_ptr set; on failure *req_ptr is untouched and
 * everything created is released in reverse order:
 * - RPMA_E_INVAL - peer, addr, port or req_ptr is NULL
 * - RPMA_E_NOMEM - out of memory
 * - RPMA_E_PROVIDER - creating the id, resolving the address (including a
 *   name that does not resolve, an ADDR_ERROR or a timeout) or the route,
 *   or creating a completion channel, CQ or QP failed (errno logged)
 * C++: arpma::async_conn_req_new(), arpma::conn_req_new().
 */
int rpma_conn_req_new(struct rpma_peer* peer, const char* addr, const char* port,
                      const struct rpma_conn_cfg* cfg, struct rpma_conn_req** req_ptr);

/*
 * rpma_conn_req_delete -- delete a connection request: destroys the QP, the
 * receive CQ, the CQ (each with its completion channel), the shared channel
 * and the id; always frees the request and sets *req_ptr to NULL.
 *
 * RETURN VALUE: 0 (also when *req_ptr is NULL), or:
 * - RPMA_E_INVAL - req_ptr is NULL
 * - RPMA_E_PROVIDER - a teardown step failed (the first error is returned)
 */
int rpma_conn_req_delete(struct rpma_conn_req** req_ptr);

/* ---- connection events ------------------------------------------------- */

enum rpma_conn_event {
  RPMA_CONN_UNDEFINED = -1, /* Undefined connection event */
  RPMA_CONN_ESTABLISHED,    /* Connection established */
  RPMA_CONN_CLOSED,         /* Connection closed */
  RPMA_CONN_LOST,           /* Connection lost */
  RPMA_CONN_REJECTED,       /* Connection rejected */
  RPMA_CONN_UNREACHABLE     /* Connection unreachable */
};

struct rpma_conn_private_data {
  void* ptr;
  uint8_t len;
};

/*
 * rpma_utils_conn_event_2str -- a static, human-readable description of a
 * connection event ("Unsupported connection event" for unknown values).
 */
const char* rpma_utils_conn_event_2str(enum rpma_conn_event conn_event);

/* ---- peer configuration ------------------------------------------------ */

/*
 * rpma_peer_cfg_new -- a new peer configuration: direct_write_to_pmem false.
 *
 * RETURN VALUE: 0 and *pcfg_ptr set, or RPMA_E_INVAL (pcfg_ptr is NULL),
 * RPMA_E_NOMEM.
 */
int rpma_peer_cfg_new(struct rpma_peer_cfg** pcfg_ptr);

/*
 * rpma_peer_cfg_delete -- frees the configuration and sets *pcfg_ptr to NULL.
 *
 * RETURN VALUE: 0 (also when *pcfg_ptr is NULL), or RPMA_E_INVAL (pcfg_ptr
 * is NULL).
 */
int rpma_peer_cfg_delete(struct rpma_peer_cfg** pcfg_ptr);

/*
 * rpma_peer_cfg_set_direct_write_to_pmem / _get_ -- whether the peer can
 * place an RDMA write directly in persistent memory; it decides whether
 * RPMA_FLUSH_TYPE_PERSISTENT is allowed on a connection the configuration is
 * applied to (rpma_conn_apply_remote_peer_cfg). Atomic per object.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (pcfg or supported is NULL).
 */
int rpma_peer_cfg_set_direct_write_to_pmem(struct rpma_peer_cfg* pcfg, bool supported);
int rpma_peer_cfg_get_direct_write_to_pmem(const struct rpma_peer_cfg* pcfg, bool* supported);

/*
 * rpma_peer_cfg_get_descriptor -- serialises the configuration into desc
 * (rpma_peer_cfg_get_descriptor_size bytes: 1) to send to the other side.
 * SECURITY: private data is not authenticated; see rpma_conn_get_private_data.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (pcfg or desc is NULL).
 */
int rpma_peer_cfg_get_descriptor(const struct rpma_peer_cfg* pcfg, void* desc);

/*
 * rpma_peer_cfg_get_descriptor_size -- the descriptor's size: 1 byte.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (pcfg or desc_size is NULL).
 */
int rpma_peer_cfg_get_descriptor_size(const struct rpma_peer_cfg* pcfg, size_t* desc_size);

/*
 * rpma_peer_cfg_from_descriptor -- a new configuration from a descriptor
 * received from the other side (any non-zero byte means "supported").
 *
 * RETURN VALUE: 0 and *pcfg_ptr set; on failure *pcfg_ptr is untouched:
 * - RPMA_E_INVAL - desc or pcfg_ptr is NULL, or desc_size is 0
 * - RPMA_E_NOMEM - out of memory
 */
int rpma_peer_cfg_from_descriptor(const void* desc, size_t desc_size,
                                  struct rpma_peer_cfg** pcfg_ptr);

/* ---- memory registration ----------------------------------------------- */

#define RPMA_MR_USAGE_READ_SRC (1 << 0)
#define RPMA_MR_USAGE_READ_DST (1 << 1)
#define RPMA_MR_USAGE_WRITE_SRC (1 << 2)
#define RPMA_MR_USAGE_WRITE_DST (1 << 3)
#define RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY (1 << 4)
#define RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT (1 << 5)
#define RPMA_MR_USAGE_SEND (1 << 6)
#define RPMA_MR_USAGE_RECV (1 << 7)

/*
 * rpma_mr_reg -- registers [ptr, ptr + size) for the usage given (a bitwise
 * OR of RPMA_MR_USAGE_*), with librpma's mapping of usage to access flags.
 *
 * RETURN VALUE: 0 and *mr_ptr set; on failure *mr_ptr is untouched:
 * - RPMA_E_INVAL - peer, ptr or mr_ptr is NULL, size is 0, usage is 0 or has
 *   unknown bits
 * - RPMA_E_NOMEM - out of memory
 * - RPMA_E_PROVIDER - the registration failed (errno logged)
 * C++: arpma::local_mr::reg().
 */
int rpma_mr_reg(struct rpma_peer* peer, void* ptr, size_t size, int usage,
                struct rpma_mr_local** mr_ptr);

/*
 * rpma_mr_dereg -- deregisters, frees and sets *mr_ptr to NULL, even when the
 * deregistration fails (as librpma's code; its manual says otherwise).
 *
 * RETURN VALUE: 0 (also when *mr_ptr is NULL), RPMA_E_INVAL (mr_ptr is
 * NULL), RPMA_E_PROVIDER.
 */
int rpma_mr_dereg(struct rpma_mr_local** mr_ptr);

/*
 * rpma_mr_get_descriptor -- writes the region's 21-byte descriptor (address
 * u64, length u64, rkey u32, usage u8; little-endian) to desc. SECURITY: send
 * it over an authenticated channel; private data is not one.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (mr or desc is NULL).
 */
int rpma_mr_get_descriptor(const struct rpma_mr_local* mr, void* desc);

/*
 * rpma_mr_get_descriptor_size -- 21.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (mr or desc_size is NULL).
 */
int rpma_mr_get_descriptor_size(const struct rpma_mr_local* mr, size_t* desc_size);

/*
 * rpma_mr_remote_from_descriptor -- decodes the other side's descriptor.
 *
 * RETURN VALUE: 0 and *mr_ptr set; on failure *mr_ptr is untouched:
 * - RPMA_E_INVAL - desc or mr_ptr is NULL, desc_size < 21, or usage is 0
 * - RPMA_E_NOMEM - out of memory
 * C++: arpma::remote_mr::from_descriptor().
 */
int rpma_mr_remote_from_descriptor(const void* desc, size_t desc_size,
                                   struct rpma_mr_remote** mr_ptr);

/*
 * rpma_mr_get_ptr / rpma_mr_get_size -- the registered address and length.
 * rpma_mr_remote_get_size -- the remote region's length.
 * rpma_mr_remote_get_flush_type -- the remote region's usage bits
 * RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT | _VISIBILITY that are set (a usage
 * mask, as in librpma, not an enum rpma_flush_type).
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (a NULL argument).
 */
int rpma_mr_get_ptr(const struct rpma_mr_local* mr, void** ptr);
int rpma_mr_get_size(const struct rpma_mr_local* mr, size_t* size);
int rpma_mr_remote_get_size(const struct rpma_mr_remote* mr, size_t* size);
int rpma_mr_remote_get_flush_type(const struct rpma_mr_remote* mr, int* flush_type);

/*
 * rpma_mr_remote_delete -- frees the remote region and sets *mr_ptr to NULL.
 *
 * RETURN VALUE: 0 (also when *mr_ptr is NULL), RPMA_E_INVAL (mr_ptr is NULL).
 */
int rpma_mr_remote_delete(struct rpma_mr_remote** mr_ptr);

/*
 * rpma_mr_advise -- ibv_advise_mr on [offset, offset + len) of a region
 * registered with On-Demand Paging (rpma_mr_reg falls back to it where the
 * device has it and a plain registration is refused: FS-DAX memory).
 * advice: IBV_ADVISE_MR_ADVICE_PREFETCH, _PREFETCH_WRITE or
 * _PREFETCH_NO_FAULT; flags: 0 or IBV_ADVISE_MR_FLAG_FLUSH. The soft
 * provider has nothing to fault in: a valid advice succeeds at once.
 *
 * RETURN VALUE: 0; RPMA_E_INVAL (mr is NULL, the range is outside the
 * region, or ibv_advise_mr says EINVAL / EFAULT); RPMA_E_NOSUPP (the device
 * has no On-Demand Paging: EOPNOTSUPP); RPMA_E_PROVIDER (any other errno).
 */
int rpma_mr_advise(struct rpma_mr_local* mr, size_t offset, size_t len, int advice, uint32_t flags);

/*
 * rpma_utils_ibv_context_is_odp_capable -- whether the device does
 * On-Demand Paging for RC reads and writes (ibv_query_device_ex's odp_caps,
 * as librpma): 1 or 0 in *is_odp_capable. Always 0 on the soft provider.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (ibv_ctx or is_odp_capable is NULL, or a
 * context no provider knows).
 */
int rpma_utils_ibv_context_is_odp_capable(struct ibv_context* ibv_ctx, int* is_odp_capable);

/* ---- data path --------------------------------------------------------- */

/* completion flags of every posting call (0 is invalid) */
#define RPMA_F_COMPLETION_ON_ERROR (1 << 0)
#define RPMA_F_COMPLETION_ALWAYS (1 << 1 | RPMA_F_COMPLETION_ON_ERROR)

#define RPMA_ATOMIC_WRITE_ALIGNMENT 8

enum rpma_flush_type {
  RPMA_FLUSH_TYPE_PERSISTENT, /* flush to persistence (needs the peer's direct write to PMem) */
  RPMA_FLUSH_TYPE_VISIBILITY, /* flush to global visibility */
};

/*
 * The posting calls below each post one work request on the connection's
 * queue pair and return; the completion (wr_id = op_context) comes from the
 * CQ: rpma_cq_wait + rpma_cq_get_wc, or rpma_conn_wait with a shared channel.
 * RPMA_F_COMPLETION_ALWAYS asks for a completion on success too;
 * RPMA_F_COMPLETION_ON_ERROR only on failure. A buffer may be reused only
 * after the operation's completion (or a later signaled one on the same queue).
 * Ranges are checked before the wire (docs/compatibility.md): librpma posts
 * them and the completion fails.
 */

/*
 * rpma_read -- post an RDMA read from a remote region
 *
 * Reads [src_offset, +len) of the remote region src into [dst_offset, +len) of
 * the local region dst. A zero-length read may pass NULL for both regions.
 * The completion's opcode is IBV_WC_RDMA_READ; the data is in dst once it
 * completed successfully.
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_INVAL - conn is NULL, flags is 0, a region is missing for a
 *   non-zero length, or a range leaves its region or is over 4 GiB
 * - RPMA_E_PROVIDER - the post failed (ENOMEM: the send queue is full)
 * C++: arpma::connection::async_read().
 */
int rpma_read(struct rpma_conn* conn, struct rpma_mr_local* dst, size_t dst_offset,
              const struct rpma_mr_remote* src, size_t src_offset, size_t len, int flags,
              const void* op_context);

/*
 * rpma_write -- post an RDMA write to a remote region
 *
 * Writes [src_offset, +len) of the local region src to [dst_offset, +len) of
 * the remote region dst. A zero-length write may pass NULL for both regions.
 * A successful completion (IBV_WC_RDMA_WRITE) says the data left src, not that
 * it is visible or persistent at the peer: rpma_flush says that.
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_INVAL - conn is NULL, flags is 0, a region is missing for a
 *   non-zero length, or a range leaves its region or is over 4 GiB
 * - RPMA_E_PROVIDER - the post failed (ENOMEM: the send queue is full)
 * C++: arpma::connection::async_write().
 */
int rpma_write(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
               const struct rpma_mr_local* src, size_t src_offset, size_t len, int flags,
               const void* op_context);

/*
 * rpma_write_with_imm -- post an RDMA write with immediate data
 *
 * rpma_write that also consumes a receive posted by the peer, which completes
 * there with IBV_WC_RECV_RDMA_WITH_IMM and imm.
 *
 * iWARP has no immediate data: the device refuses the post (RPMA_E_PROVIDER,
 * as under librpma; docs/compatibility.md).
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_INVAL - as rpma_write
 * - RPMA_E_PROVIDER - the post failed (ENOMEM: the send queue is full;
 *   EINVAL: a device without immediate data)
 * C++: arpma::connection::async_write_with_imm().
 */
int rpma_write_with_imm(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
                        const struct rpma_mr_local* src, size_t src_offset, size_t len, int flags,
                        uint32_t imm, const void* op_context);

/*
 * rpma_atomic_write -- post an 8-byte atomic write to a remote region
 *
 * Writes the 8 bytes of src to dst at dst_offset as one unit: the native ATOMIC_WRITE where the
 * device has it, else an inline 8-byte RDMA write, as librpma.
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_INVAL - conn, dst or src is NULL, flags is 0, dst_offset is not a
 *   multiple of RPMA_ATOMIC_WRITE_ALIGNMENT, or the 8 bytes leave dst
 * - RPMA_E_PROVIDER - the post failed (ENOMEM: the send queue is full)
 * C++: arpma::connection::async_atomic_write().
 */
int rpma_atomic_write(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset,
                      const char src[8], int flags, const void* op_context);

/*
 * rpma_flush -- post a flush of earlier writes to a remote region
 *
 * Completes once the earlier writes to [dst_offset, +len) of dst are placed
 * (RPMA_FLUSH_TYPE_VISIBILITY) or persistent (RPMA_FLUSH_TYPE_PERSISTENT): the native FLUSH where
 * the device has it, else librpma's emulation (an 8-byte read).
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_NOSUPP - PERSISTENT without rpma_conn_apply_remote_peer_cfg saying
 *   direct write to PMem, or a region registered without that flush usage
 * - RPMA_E_INVAL - conn or dst is NULL, flags is 0, an unknown type (librpma
 *   does not check), or the range leaves dst
 * - RPMA_E_PROVIDER - the post failed (ENOMEM: the send queue is full)
 * C++: arpma::connection::async_flush().
 */
int rpma_flush(struct rpma_conn* conn, struct rpma_mr_remote* dst, size_t dst_offset, size_t len,
               enum rpma_flush_type type, int flags, const void* op_context);

/*
 * rpma_send / rpma_send_with_imm -- post a message (with immediate data)
 *
 * Sends [offset, +len) of src as one message; it consumes a receive posted by the peer (rpma_recv,
 * rpma_conn_req_recv, rpma_srq_recv), which completes with IBV_WC_RECV (and imm for
 * rpma_send_with_imm). A zero-length message may pass NULL for src.
 *
 * iWARP has no immediate data: rpma_send_with_imm is refused there by the
 * device (RPMA_E_PROVIDER, as under librpma; docs/compatibility.md).
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_INVAL - conn is NULL, flags is 0, src is missing for a non-zero
 *   length, or the range leaves src or is over 4 GiB
 * - RPMA_E_PROVIDER - the post failed (ENOMEM: the send queue is full;
 *   EINVAL: immediate data on a device without it)
 * C++: arpma::connection::async_send() / async_send_with_imm().
 */
int rpma_send(struct rpma_conn* conn, const struct rpma_mr_local* src, size_t offset, size_t len,
              int flags, const void* op_context);
int rpma_send_with_imm(struct rpma_conn* conn, const struct rpma_mr_local* src, size_t offset,
                       size_t len, int flags, uint32_t imm, const void* op_context);

/*
 * rpma_recv -- post a receive buffer
 *
 * [offset, +len) of dst takes the peer's next message (no flags: a receive always completes,
 * IBV_WC_RECV or IBV_WC_RECV_RDMA_WITH_IMM). dst may be NULL with offset and len 0 (a receive for a
 * write with immediate).
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_INVAL - conn is NULL, dst is missing for a non-zero length, or the
 *   range leaves dst or is over 4 GiB
 * - RPMA_E_PROVIDER - the post failed (ENOMEM: the receive queue is full;
 *   siw: EINVAL for a receive without a buffer)
 * C++: arpma::connection::async_recv().
 */
int rpma_recv(struct rpma_conn* conn, struct rpma_mr_local* dst, size_t offset, size_t len,
              const void* op_context);

/* ---- shared receive queues --------------------------------------------- */

/*
 * rpma_srq_cfg_new / rpma_srq_cfg_delete -- a shared RQ configuration with
 * librpma's code defaults: rq_size 20, rcq_size 20 (librpma's manual says
 * 100). Fields are atomics, as rpma_conn_cfg's. delete sets *cfg_ptr to NULL.
 * rpma_srq_cfg_set_rq_size / _get_rq_size -- the SRQ's max_wr.
 * rpma_srq_cfg_set_rcq_size / _get_rcq_size -- depth of the SRQ's own
 *   receive CQ (0: none; receives then complete on each connection's CQ or
 *   receive CQ).
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL when cfg_ptr, cfg or the out-pointer is
 * NULL, RPMA_E_NOMEM (new). delete with *cfg_ptr NULL is 0.
 * C++: arpma::srq_config.
 */
int rpma_srq_cfg_new(struct rpma_srq_cfg** cfg_ptr);
int rpma_srq_cfg_delete(struct rpma_srq_cfg** cfg_ptr);
int rpma_srq_cfg_set_rq_size(struct rpma_srq_cfg* cfg, uint32_t rq_size);
int rpma_srq_cfg_get_rq_size(const struct rpma_srq_cfg* cfg, uint32_t* rq_size);
int rpma_srq_cfg_set_rcq_size(struct rpma_srq_cfg* cfg, uint32_t rcq_size);
int rpma_srq_cfg_get_rcq_size(const struct rpma_srq_cfg* cfg, uint32_t* rcq_size);

/*
 * rpma_srq_new -- a shared receive queue on the peer's protection domain
 * (max_sge 1) and, unless its rcq_size is 0, a receive CQ with a completion
 * channel of its own (blocking fd, like every completion fd here). cfg NULL:
 * the defaults. Attach it with rpma_conn_cfg_set_srq.
 *
 * RETURN VALUE: 0 and *srq_ptr set; on failure nothing is left:
 * - RPMA_E_INVAL - peer or srq_ptr is NULL
 * - RPMA_E_NOMEM - out of memory
 * - RPMA_E_PROVIDER - creating the SRQ, its CQ or its channel failed
 * C++: arpma::srq::create().
 */
int rpma_srq_new(struct rpma_peer* peer, struct rpma_srq_cfg* cfg, struct rpma_srq** srq_ptr);

/*
 * rpma_srq_delete -- lets go of the SRQ and sets *srq_ptr to NULL. Unlike
 * librpma (where the SRQ must outlive its connections), connections still
 * using it keep it: it is destroyed (receive CQ, then SRQ) when the last of
 * them is deleted, or here when none is left.
 *
 * RETURN VALUE: 0 (also when *srq_ptr is NULL), RPMA_E_INVAL (srq_ptr is
 * NULL), RPMA_E_PROVIDER (destroying failed here; the first error).
 */
int rpma_srq_delete(struct rpma_srq** srq_ptr);

/*
 * rpma_srq_recv -- a buffer for the next send to any connection using the
 * SRQ; its completion (wr_id = op_context, qp_num of the connection that
 * received) comes on the SRQ's receive CQ, or else on that connection's.
 * dst may be NULL with offset and len 0.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (srq NULL, dst NULL with offset or len
 * non-zero, or [offset, +len) outside dst), RPMA_E_PROVIDER (e.g. the SRQ
 * is full).
 */
int rpma_srq_recv(struct rpma_srq* srq, struct rpma_mr_local* dst, size_t offset, size_t len,
                  const void* op_context);

/*
 * rpma_srq_get_rcq -- the SRQ's receive CQ (use it with rpma_cq_wait,
 * rpma_cq_get_wc and rpma_cq_get_fd; owned by the SRQ), or NULL when it has
 * none.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (srq or rcq_ptr is NULL).
 */
int rpma_srq_get_rcq(const struct rpma_srq* srq, struct rpma_cq** rcq_ptr);

/* ---- completions ------------------------------------------------------- */

/*
 * rpma_cq_wait -- waits for the CQ's completion channel (blocking unless
 * O_NONBLOCK is set on rpma_cq_get_fd), acknowledges the event and re-arms
 * the CQ. Drain the CQ with rpma_cq_get_wc afterwards; a wake-up may find
 * nothing (RPMA_E_NO_COMPLETION there).
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (cq is NULL), RPMA_E_SHARED_CHANNEL (the
 * connection shares one channel: use rpma_conn_wait), RPMA_E_NO_COMPLETION
 * (no event: the fd is non-blocking, or reading it failed), RPMA_E_PROVIDER
 * (re-arming failed).
 */
int rpma_cq_wait(struct rpma_cq* cq);

/*
 * rpma_cq_get_wc -- takes up to num_entries completions (ibv_poll_cq).
 * num_entries_got may be NULL only when num_entries is 1.
 *
 * RETURN VALUE: 0 and *num_entries_got set, or RPMA_E_INVAL (cq or wc NULL,
 * num_entries < 1, or num_entries > 1 with num_entries_got NULL),
 * RPMA_E_NO_COMPLETION (the CQ is empty), RPMA_E_PROVIDER (polling failed).
 */
int rpma_cq_get_wc(struct rpma_cq* cq, int num_entries, struct ibv_wc* wc, int* num_entries_got);

/*
 * rpma_conn_wait -- waits on the connection's shared completion channel,
 * acknowledges the event, re-arms the CQ that fired and reports it (*cq; and
 * *is_rcq when not NULL). flags is reserved (ignored), as in librpma.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (conn or cq is NULL),
 * RPMA_E_NOT_SHARED_CHNL, RPMA_E_NO_COMPLETION (no event), RPMA_E_UNKNOWN
 * (an event of neither CQ), RPMA_E_PROVIDER (re-arming failed; *cq = NULL).
 */
int rpma_conn_wait(struct rpma_conn* conn, int flags, struct rpma_cq** cq, bool* is_rcq);

/* ---- listening endpoint ------------------------------------------------ */

/*
 * rpma_ep_listen -- listens for incoming connections on addr:port (numeric
 * or a name; port "0" picks a free one). The endpoint has its own event
 * channel, blocking until the caller sets O_NONBLOCK on rpma_ep_get_fd.
 *
 * RETURN VALUE: 0 and *ep_ptr set; on failure *ep_ptr is untouched and
 * everything created is released:
 * - RPMA_E_INVAL - peer, addr, port or ep_ptr is NULL
 * - RPMA_E_NOMEM - out of memory
 * - RPMA_E_PROVIDER - creating the channel or id, resolving, binding
 *   (e.g. the address is in use) or listening failed (errno logged)
 * C++: arpma::endpoint::listen().
 */
int rpma_ep_listen(struct rpma_peer* peer, const char* addr, const char* port,
                   struct rpma_ep** ep_ptr);

/*
 * rpma_ep_shutdown -- stops listening: destroys the id and the event
 * channel, frees the endpoint and sets *ep_ptr to NULL, even when a step
 * fails. Requests and connections made from it live on (each has its own
 * event channel).
 *
 * RETURN VALUE: 0 (also when *ep_ptr is NULL), RPMA_E_INVAL (ep_ptr is
 * NULL), RPMA_E_PROVIDER (a step failed; the first error).
 */
int rpma_ep_shutdown(struct rpma_ep** ep_ptr);

/*
 * rpma_ep_get_fd -- the endpoint's event channel fd: readable when an
 * incoming request waits. Setting O_NONBLOCK on it makes
 * rpma_ep_next_conn_req non-blocking.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (ep or fd is NULL).
 */
int rpma_ep_get_fd(const struct rpma_ep* ep, int* fd);

/*
 * rpma_ep_next_conn_req -- takes the next incoming connection request and
 * creates its CQ(s) and QP with cfg (NULL: defaults), as the client's side
 * does, before it is accepted. Blocks on a blocking fd. The request gets the
 * event channel of its future connection at once, so its events never reach
 * the endpoint's fd (librpma moves it only when accepting).
 *
 * RETURN VALUE: 0 and *req_ptr set; on failure *req_ptr is untouched:
 * - RPMA_E_INVAL - ep or req_ptr is NULL, or the event read was not a
 *   CONNECT_REQUEST (it is consumed, as in librpma)
 * - RPMA_E_NO_EVENT - the fd is non-blocking and nothing is pending (EAGAIN;
 *   librpma reported this only for ENODATA)
 * - RPMA_E_NOMEM - out of memory (the request is rejected)
 * - RPMA_E_PROVIDER - reading the event or creating the queues failed (the
 *   request is rejected and its id destroyed)
 * C++: arpma::endpoint::async_next_conn_req().
 */
int rpma_ep_next_conn_req(struct rpma_ep* ep, const struct rpma_conn_cfg* cfg,
                          struct rpma_conn_req** req_ptr);

/* ---- connecting -------------------------------------------------------- */

/*
 * rpma_conn_req_connect -- connects an outgoing request (rdma_connect) or
 * accepts an incoming one (rdma_accept), with pdata as private data (at most
 * 56 bytes to connect, 196 to accept; NULL: none), and returns the
 * connection at once: RPMA_CONN_ESTABLISHED (or REJECTED, UNREACHABLE) comes
 * from rpma_conn_next_event. The connection's event fd is blocking until
 * the caller sets O_NONBLOCK.
 *
 * The request is consumed (freed, *req_ptr set to NULL) in every case but
 * the first error below; *conn_ptr is set only on success.
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_INVAL - req_ptr or *req_ptr is NULL (nothing consumed); conn_ptr
 *   is NULL, or pdata is given with a NULL ptr or a 0 len (consumed)
 * - RPMA_E_NOMEM - out of memory (consumed)
 * - RPMA_E_PROVIDER - connect or accept failed, e.g. private data too long
 *   (consumed; a failed accept also rejects and destroys the id, which
 *   librpma left behind)
 * C++: arpma::conn_req::async_connect().
 */
int rpma_conn_req_connect(struct rpma_conn_req** req_ptr,
                          const struct rpma_conn_private_data* pdata, struct rpma_conn** conn_ptr);

/*
 * rpma_conn_req_get_private_data -- the private data an incoming request
 * came with ({NULL, 0} for an outgoing one or when none was sent); borrowed,
 * valid until the request is connected or deleted.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (req or pdata is NULL).
 */
int rpma_conn_req_get_private_data(const struct rpma_conn_req* req,
                                   struct rpma_conn_private_data* pdata);

/*
 * rpma_conn_req_recv -- posts a receive into [offset, offset + len) of dst
 * before the connection exists (a message the peer sends right after
 * connecting finds it). op_context comes back as the completion's wr_id.
 *
 * RETURN VALUE: 0, or:
 * - RPMA_E_INVAL - req or dst is NULL, or the range leaves the region or is
 *   over 4 GiB (librpma posts it and the completion fails)
 * - RPMA_E_PROVIDER - ibv_post_recv failed (e.g. ENOMEM: the receive queue
 *   is full)
 * C++: arpma::conn_req::post_recv().
 */
int rpma_conn_req_recv(struct rpma_conn_req* req, struct rpma_mr_local* dst, size_t offset,
                       size_t len, const void* op_context);

/* ---- connection -------------------------------------------------------- */

/*
 * rpma_conn_get_event_fd -- the connection's event channel fd: readable
 * exactly when rpma_conn_next_event will not block. No thread of arpma
 * reads it behind the caller's back.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (conn or fd is NULL).
 */
int rpma_conn_get_event_fd(const struct rpma_conn* conn, int* fd);

/*
 * rpma_conn_next_event -- reads one connection event (blocking on a
 * blocking fd) and maps it: ESTABLISHED; CLOSED (DISCONNECTED,
 * TIMEWAIT_EXIT); LOST (CONNECT_ERROR, DEVICE_REMOVAL); REJECTED;
 * UNREACHABLE. The first ESTABLISHED of an outgoing connection brings the
 * server's private data (rpma_conn_get_private_data).
 *
 * RETURN VALUE: 0 and *event set, or:
 * - RPMA_E_INVAL - conn or event is NULL
 * - RPMA_E_NO_EVENT - the fd is non-blocking and nothing is pending (EAGAIN
 *   as well as ENODATA; librpma reported EAGAIN as RPMA_E_PROVIDER)
 * - RPMA_E_UNKNOWN - an event without a mapping (consumed, logged)
 * - RPMA_E_PROVIDER - reading the event failed
 * C++: arpma::connection::async_next_event().
 */
int rpma_conn_next_event(struct rpma_conn* conn, enum rpma_conn_event* event);

/*
 * rpma_conn_get_private_data -- the peer's private data: the client's on the
 * server, the server's accept data on the client once ESTABLISHED was read
 * ({NULL, 0} before or when none). Borrowed until rpma_conn_delete. It is
 * not authenticated: do not trust descriptors received this way without a
 * secure channel. Transports may pad it beyond what was sent.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (conn or pdata is NULL).
 */
int rpma_conn_get_private_data(const struct rpma_conn* conn, struct rpma_conn_private_data* pdata);

/*
 * rpma_conn_apply_remote_peer_cfg -- takes the peer's direct_write_to_pmem
 * into the connection (gates RPMA_FLUSH_TYPE_PERSISTENT). Atomic.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (conn or pcfg is NULL).
 */
int rpma_conn_apply_remote_peer_cfg(struct rpma_conn* conn, const struct rpma_peer_cfg* pcfg);

/*
 * rpma_conn_get_qp_num -- the number of the connection's queue pair.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (conn or qp_num is NULL).
 */
int rpma_conn_get_qp_num(const struct rpma_conn* conn, uint32_t* qp_num);

/*
 * rpma_conn_get_cq / rpma_conn_get_rcq -- the connection's CQ (never NULL)
 * and its receive CQ (NULL when cfg's rcq_size was 0); owned by the
 * connection.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (conn or the out pointer is NULL).
 */
int rpma_conn_get_cq(const struct rpma_conn* conn, struct rpma_cq** cq_ptr);
int rpma_conn_get_rcq(const struct rpma_conn* conn, struct rpma_cq** rcq_ptr);

/*
 * rpma_conn_get_compl_fd -- the fd of the completion channel the CQ and the
 * receive CQ share (cfg: rpma_conn_cfg_set_compl_channel(cfg, true)).
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (conn or fd is NULL),
 * RPMA_E_NOT_SHARED_CHNL (the channel is not shared).
 */
int rpma_conn_get_compl_fd(const struct rpma_conn* conn, int* fd);

/*
 * rpma_cq_get_fd -- the fd of the CQ's completion channel (the shared one
 * when the connection's CQs share a channel: the same fd for both).
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (cq or fd is NULL).
 */
int rpma_cq_get_fd(const struct rpma_cq* cq, int* fd);

/*
 * rpma_conn_disconnect -- asks for the connection to end (rdma_disconnect);
 * RPMA_CONN_CLOSED follows from rpma_conn_next_event on both sides. Also
 * fine after RPMA_CONN_CLOSED was read.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL (conn is NULL), RPMA_E_PROVIDER.
 */
int rpma_conn_disconnect(struct rpma_conn* conn);

/*
 * rpma_conn_delete -- destroys the QP, the receive CQ, the CQ, the id, the
 * shared completion channel and the event channel, in that order, frees the
 * connection and sets *conn_ptr to NULL, even when a step fails. It does not
 * wait for the peer (call rpma_conn_disconnect first for an orderly close).
 *
 * RETURN VALUE: 0 (also when *conn_ptr is NULL), RPMA_E_INVAL (conn_ptr is
 * NULL), RPMA_E_PROVIDER (a step failed; the first error).
 */
int rpma_conn_delete(struct rpma_conn** conn_ptr);

/* ---- errors and logging ------------------------------------------------ */

/*
 * rpma_err_2str -- a static description of 0 or an RPMA_E_* value
 * ("Unknown error" for any other value).
 */
const char* rpma_err_2str(int ret);

enum rpma_log_level {
  RPMA_LOG_DISABLED = -1, /* no messages */
  RPMA_LOG_LEVEL_FATAL,   /* fatal errors */
  RPMA_LOG_LEVEL_ERROR,   /* errors */
  RPMA_LOG_LEVEL_WARNING, /* warnings */
  RPMA_LOG_LEVEL_NOTICE,  /* notices */
  RPMA_LOG_LEVEL_INFO,    /* informational messages */
  RPMA_LOG_LEVEL_DEBUG,   /* debug messages */
};

enum rpma_log_threshold {
  RPMA_LOG_THRESHOLD,     /* main threshold: filters every message */
  RPMA_LOG_THRESHOLD_AUX, /* default function also prints these to stderr */
  RPMA_LOG_THRESHOLD_MAX
};

/*
 * rpma_log_set_threshold / rpma_log_get_threshold -- the logging thresholds.
 * Defaults: release builds RPMA_LOG_LEVEL_WARNING (main) and
 * RPMA_LOG_DISABLED (aux); debug builds RPMA_LOG_LEVEL_DEBUG and
 * RPMA_LOG_LEVEL_WARNING.
 *
 * RETURN VALUE: 0, or RPMA_E_INVAL for an unknown threshold, a level outside
 * [RPMA_LOG_DISABLED, RPMA_LOG_LEVEL_DEBUG], or a NULL level pointer.
 */
int rpma_log_set_threshold(enum rpma_log_threshold threshold, enum rpma_log_level level);
int rpma_log_get_threshold(enum rpma_log_threshold threshold, enum rpma_log_level* level);

/*
 * rpma_log_function -- the type of a user's logging function; it receives
 * each message that passed the main threshold, as a format and arguments.
 */
/* NOLINTBEGIN(modernize-use-using): a C header, also compiled as C11 */
typedef void rpma_log_function(enum rpma_log_level level, const char* file_name, const int line_no,
                               const char* function_name, const char* message_format, ...);
/* NOLINTEND(modernize-use-using) */

#define RPMA_LOG_USE_DEFAULT_FUNCTION (NULL)

/*
 * rpma_log_set_function -- install a logging function, or restore the
 * default one (syslog, plus stderr up to the aux threshold) with
 * RPMA_LOG_USE_DEFAULT_FUNCTION. The C++ sink (arpma::set_log_sink) and this
 * function replace the same sink.
 *
 * RETURN VALUE: 0, or RPMA_E_NOMEM when the function cannot be installed.
 */
int rpma_log_set_function(rpma_log_function* log_function);

#ifdef __cplusplus
}
#endif

#endif /* LIBRPMA_H */
