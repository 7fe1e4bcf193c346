// rpma_conn_cfg_*: librpma 1.3's connection configuration (src/conn_cfg.c),
// with the same argument checks, over atomics.
#include <librpma.h>

#include "capi/conn_cfg.hpp"
#include "capi/objects.hpp"

#include <chrono>
#include <new>

namespace arpma::capi {

conn_cfg to_conn_cfg(const rpma_conn_cfg* cfg) noexcept {
  conn_cfg value;
  if (cfg == nullptr) return value;
  value.timeout = std::chrono::milliseconds(cfg->timeout_ms.load());
  value.cq_size = cfg->cq_size.load();
  value.rcq_size = cfg->rcq_size.load();
  value.sq_size = cfg->sq_size.load();
  value.rq_size = cfg->rq_size.load();
  value.shared_completion_channel = cfg->shared_comp_channel.load();
  if (const rpma_srq* srq = cfg->srq.load(); srq != nullptr)
    value.srq = arpma::detail::access::state(srq->cxx);
  return value;
}

rpma_srq* srq_of(const rpma_conn_cfg* cfg) noexcept {
  return cfg == nullptr ? nullptr : cfg->srq.load();
}

}  // namespace arpma::capi

extern "C" {

int rpma_conn_cfg_new(struct rpma_conn_cfg** cfg_ptr) {
  if (cfg_ptr == nullptr) return RPMA_E_INVAL;
  auto* cfg = arpma::capi::new_handle<rpma_conn_cfg>("alloc rpma_conn_cfg");
  if (cfg == nullptr) return RPMA_E_NOMEM;
  *cfg_ptr = cfg;
  return 0;
}

int rpma_conn_cfg_delete(struct rpma_conn_cfg** cfg_ptr) {
  if (cfg_ptr == nullptr) return RPMA_E_INVAL;
  if (*cfg_ptr == nullptr) return 0;
  delete *cfg_ptr;
  *cfg_ptr = nullptr;
  return 0;
}

int rpma_conn_cfg_set_timeout(struct rpma_conn_cfg* cfg, int timeout_ms) {
  if (cfg == nullptr || timeout_ms < 0) return RPMA_E_INVAL;
  cfg->timeout_ms.store(timeout_ms);
  return 0;
}

int rpma_conn_cfg_get_timeout(const struct rpma_conn_cfg* cfg, int* timeout_ms) {
  if (cfg == nullptr || timeout_ms == nullptr) return RPMA_E_INVAL;
  *timeout_ms = cfg->timeout_ms.load();
  return 0;
}

int rpma_conn_cfg_set_cq_size(struct rpma_conn_cfg* cfg, uint32_t cq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->cq_size.store(cq_size);
  return 0;
}

int rpma_conn_cfg_get_cq_size(const struct rpma_conn_cfg* cfg, uint32_t* cq_size) {
  if (cfg == nullptr || cq_size == nullptr) return RPMA_E_INVAL;
  *cq_size = cfg->cq_size.load();
  return 0;
}

int rpma_conn_cfg_set_rcq_size(struct rpma_conn_cfg* cfg, uint32_t rcq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->rcq_size.store(rcq_size);
  return 0;
}

int rpma_conn_cfg_get_rcq_size(const struct rpma_conn_cfg* cfg, uint32_t* rcq_size) {
  if (cfg == nullptr || rcq_size == nullptr) return RPMA_E_INVAL;
  *rcq_size = cfg->rcq_size.load();
  return 0;
}

int rpma_conn_cfg_set_sq_size(struct rpma_conn_cfg* cfg, uint32_t sq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->sq_size.store(sq_size);
  return 0;
}

int rpma_conn_cfg_get_sq_size(const struct rpma_conn_cfg* cfg, uint32_t* sq_size) {
  if (cfg == nullptr || sq_size == nullptr) return RPMA_E_INVAL;
  *sq_size = cfg->sq_size.load();
  return 0;
}

int rpma_conn_cfg_set_rq_size(struct rpma_conn_cfg* cfg, uint32_t rq_size) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->rq_size.store(rq_size);
  return 0;
}

int rpma_conn_cfg_get_rq_size(const struct rpma_conn_cfg* cfg, uint32_t* rq_size) {
  if (cfg == nullptr || rq_size == nullptr) return RPMA_E_INVAL;
  *rq_size = cfg->rq_size.load();
  return 0;
}

int rpma_conn_cfg_set_compl_channel(struct rpma_conn_cfg* cfg, bool shared) {
  if (cfg == nullptr) return RPMA_E_INVAL;
  cfg->shared_comp_channel.store(shared);
  return 0;
}

int rpma_conn_cfg_get_compl_channel(const struct rpma_conn_cfg* cfg, bool* shared) {
  if (cfg == nullptr || shared == nullptr) return RPMA_E_INVAL;
  *shared = cfg->shared_comp_channel.load();
  return 0;
}

// librpma checks srq == NULL too (its manual mentions only cfg).
int rpma_conn_cfg_set_srq(struct rpma_conn_cfg* cfg, struct rpma_srq* srq) {
  if (cfg == nullptr || srq == nullptr) return RPMA_E_INVAL;
  cfg->srq.store(srq);
  return 0;
}

int rpma_conn_cfg_get_srq(const struct rpma_conn_cfg* cfg, struct rpma_srq** srq_ptr) {
  if (cfg == nullptr || srq_ptr == nullptr) return RPMA_E_INVAL;
  *srq_ptr = cfg->srq.load();
  return 0;
}

}  // extern "C"
