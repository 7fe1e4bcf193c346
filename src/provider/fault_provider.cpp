// Fault points at the provider seam. Creating calls fail before the real call, with ENOMEM
// (as a failed allocation); releasing calls make the real call and then report EIO, so an
// injected failure leaks nothing by itself and what is checked is that the caller still
// releases everything else; the calls that deliver events or completions (get_cm_event,
// get_cq_event, poll_cq) are not points: how often they run depends on timing, so a count
// run and an injection run would not number the points alike.
#ifdef ARPMA_FAULT_INJECTION

#include "provider/fault_provider.hpp"

#include "support/fault.hpp"

#include <cerrno>

namespace arpma::provider {
namespace {

std::error_code err(int e) noexcept { return {e, std::system_category()}; }

/// A creating call: fails with ENOMEM at `point` before the real call, else
/// counts what `create` made as alive. `point` must be a string literal.
template <class Create>
auto created(const char* point, fault::object kind, Create&& create) -> decltype(create()) {
  if (ARPMA_FAULT_POINT(point)) return err(ENOMEM);
  auto made = create();
  if (made) fault::note_object(kind, 1);
  return made;
}

/// A releasing call, already made with result `ec`: counts the object gone,
/// then reports EIO at `point` (nothing leaks by the injection itself).
std::error_code released(const char* point, fault::object kind, std::error_code ec) noexcept {
  if (!ec) fault::note_object(kind, -1);
  if (ARPMA_FAULT_POINT(point)) return err(EIO);
  return ec;
}

/// A read event: a CONNECT_REQUEST hands out a new id, which the caller must
/// destroy.
std::error_code note_request(std::error_code ec, const cm_event& out) {
  if (!ec && out.type == cm_event_type::connect_request) fault::note_object(fault::object::id, 1);
  return ec;
}

}  // namespace

result<device*> fault_provider::find_device(const char* addr, bool remote) {
  if (ARPMA_FAULT_POINT("find_device")) return err(ENODEV);
  return inner_.find_device(addr, remote);
}

result<event_channel*> fault_provider::create_event_channel() {
  return created("create_event_channel", fault::object::event_channel,
                 [&] { return inner_.create_event_channel(); });
}

void fault_provider::destroy_event_channel(event_channel* channel) noexcept {
  if (channel != nullptr) fault::note_object(fault::object::event_channel, -1);
  inner_.destroy_event_channel(channel);
}

int fault_provider::event_channel_fd(const event_channel* channel) const noexcept {
  return inner_.event_channel_fd(channel);
}

std::error_code fault_provider::get_cm_event(event_channel* channel, cm_event& out) {
  return note_request(inner_.get_cm_event(channel, out), out);
}

std::error_code fault_provider::get_cm_event_nonblocking(event_channel* channel, cm_event& out) {
  return note_request(inner_.get_cm_event_nonblocking(channel, out), out);
}

result<cm_id*> fault_provider::create_id(event_channel* channel, std::uint64_t context) {
  return created("create_id", fault::object::id,
                 [&] { return inner_.create_id(channel, context); });
}

std::error_code fault_provider::destroy_id(cm_id* id) noexcept {
  return released("destroy_id", fault::object::id, inner_.destroy_id(id));
}

std::error_code fault_provider::resolve_addr(cm_id* id, const sockaddr* dst, int timeout_ms) {
  if (ARPMA_FAULT_POINT("resolve_addr")) return err(EADDRNOTAVAIL);
  return inner_.resolve_addr(id, dst, timeout_ms);
}

std::error_code fault_provider::resolve_route(cm_id* id, int timeout_ms) {
  if (ARPMA_FAULT_POINT("resolve_route")) return err(EIO);
  return inner_.resolve_route(id, timeout_ms);
}

device* fault_provider::id_device(const cm_id* id) const noexcept { return inner_.id_device(id); }

std::error_code fault_provider::bind_addr(cm_id* id, const sockaddr* addr) {
  if (ARPMA_FAULT_POINT("bind_addr")) return err(EADDRINUSE);
  return inner_.bind_addr(id, addr);
}

std::error_code fault_provider::listen(cm_id* id, int backlog) {
  if (ARPMA_FAULT_POINT("listen")) return err(EIO);
  return inner_.listen(id, backlog);
}

std::uint16_t fault_provider::local_port(const cm_id* id) const noexcept {
  return inner_.local_port(id);
}

std::error_code fault_provider::connect(cm_id* id, const conn_param& param) {
  if (ARPMA_FAULT_POINT("connect")) return err(EIO);
  return inner_.connect(id, param);
}

std::error_code fault_provider::accept(cm_id* id, const conn_param& param) {
  if (ARPMA_FAULT_POINT("accept")) return err(EIO);
  return inner_.accept(id, param);
}

std::error_code fault_provider::reject(cm_id* id, const void* private_data, std::uint8_t len) {
  if (ARPMA_FAULT_POINT("reject")) return err(EIO);
  return inner_.reject(id, private_data, len);
}

std::error_code fault_provider::disconnect(cm_id* id) {
  if (ARPMA_FAULT_POINT("disconnect")) return err(EIO);
  return inner_.disconnect(id);
}

std::error_code fault_provider::migrate_id(cm_id* id, event_channel* channel) {
  if (ARPMA_FAULT_POINT("migrate_id")) return err(EIO);
  return inner_.migrate_id(id, channel);
}

void fault_provider::set_context(cm_id* id, std::uint64_t context) noexcept {
  inner_.set_context(id, context);
}

result<pd*> fault_provider::alloc_pd(device* dev) {
  return created("alloc_pd", fault::object::pd, [&] { return inner_.alloc_pd(dev); });
}

std::error_code fault_provider::dealloc_pd(pd* pd) noexcept {
  return released("dealloc_pd", fault::object::pd, inner_.dealloc_pd(pd));
}

result<comp_channel*> fault_provider::create_comp_channel(device* dev) {
  return created("create_comp_channel", fault::object::comp_channel,
                 [&] { return inner_.create_comp_channel(dev); });
}

std::error_code fault_provider::destroy_comp_channel(comp_channel* channel) noexcept {
  return released("destroy_comp_channel", fault::object::comp_channel,
                  inner_.destroy_comp_channel(channel));
}

int fault_provider::comp_channel_fd(const comp_channel* channel) const noexcept {
  return inner_.comp_channel_fd(channel);
}

result<cq*> fault_provider::create_cq(device* dev, int cqe, comp_channel* channel) {
  return created("create_cq", fault::object::cq,
                 [&] { return inner_.create_cq(dev, cqe, channel); });
}

std::error_code fault_provider::destroy_cq(cq* cq) noexcept {
  return released("destroy_cq", fault::object::cq, inner_.destroy_cq(cq));
}

std::error_code fault_provider::req_notify_cq(cq* cq, bool solicited_only) {
  if (ARPMA_FAULT_POINT("req_notify_cq")) return err(EIO);
  return inner_.req_notify_cq(cq, solicited_only);
}

std::error_code fault_provider::create_qp(cm_id* id, pd* pd, const qp_config& config) {
  if (ARPMA_FAULT_POINT("create_qp")) return err(ENOMEM);
  const std::error_code ec = inner_.create_qp(id, pd, config);
  if (!ec) fault::note_object(fault::object::qp, 1);
  return ec;
}

void fault_provider::destroy_qp(cm_id* id) noexcept {
  // rdma_destroy_qp semantics: a call on an id without a QP does nothing
  if (inner_.qp_num(id) != 0) fault::note_object(fault::object::qp, -1);
  inner_.destroy_qp(id);
}

std::uint32_t fault_provider::qp_num(const cm_id* id) const noexcept { return inner_.qp_num(id); }

device_caps fault_provider::caps(const device* dev) const noexcept { return inner_.caps(dev); }

result<mr*> fault_provider::reg_mr(pd* pd, void* addr, std::size_t length, int access) {
  return created("reg_mr", fault::object::mr,
                 [&] { return inner_.reg_mr(pd, addr, length, access); });
}

std::error_code fault_provider::dereg_mr(mr* mr) noexcept {
  return released("dereg_mr", fault::object::mr, inner_.dereg_mr(mr));
}

std::error_code fault_provider::advise_mr(mr* mr, std::size_t offset, std::uint32_t length,
                                          int advice, std::uint32_t flags) {
  if (ARPMA_FAULT_POINT("advise_mr")) return err(EIO);
  return inner_.advise_mr(mr, offset, length, advice, flags);
}

std::uint32_t fault_provider::mr_lkey(const mr* mr) const noexcept { return inner_.mr_lkey(mr); }

std::uint32_t fault_provider::mr_rkey(const mr* mr) const noexcept { return inner_.mr_rkey(mr); }

std::error_code fault_provider::post_send(cm_id* id, const send_wr& wr) {
  if (ARPMA_FAULT_POINT("post_send")) return err(ENOMEM);  // the send queue is full
  return inner_.post_send(id, wr);
}

std::error_code fault_provider::post_recv(cm_id* id, const recv_wr& wr) {
  if (ARPMA_FAULT_POINT("post_recv")) return err(ENOMEM);
  return inner_.post_recv(id, wr);
}

result<std::size_t> fault_provider::poll_cq(cq* cq, std::span<work_completion> out) {
  return inner_.poll_cq(cq, out);
}

result<cq*> fault_provider::get_cq_event(comp_channel* channel) {
  return inner_.get_cq_event(channel);
}

void fault_provider::ack_cq_events(cq* cq, unsigned count) noexcept {
  inner_.ack_cq_events(cq, count);
}

result<srq*> fault_provider::create_srq(pd* pd, std::uint32_t max_wr, std::uint32_t max_sge) {
  return created("create_srq", fault::object::srq,
                 [&] { return inner_.create_srq(pd, max_wr, max_sge); });
}

std::error_code fault_provider::destroy_srq(srq* srq) noexcept {
  return released("destroy_srq", fault::object::srq, inner_.destroy_srq(srq));
}

std::error_code fault_provider::post_srq_recv(srq* srq, const recv_wr& wr) {
  if (ARPMA_FAULT_POINT("post_srq_recv")) return err(ENOMEM);
  return inner_.post_srq_recv(srq, wr);
}

}  // namespace arpma::provider

#endif
