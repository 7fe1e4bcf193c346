// libFuzzer harness for the soft provider's data-path frame parser: the
// provider's own header check (soft_wire::parse_header) and then what its
// receiver does with each complete data frame (soft_dp::on_frame: the
// responder executing READ/WRITE/SEND/ATOMIC WRITE/FLUSH requests against
// registered memory, the requester retiring its send queue on ACK/NAK/READ
// responses), called in isolation on a ready QP whose link records what it
// would send. Nothing of the parser is copied here; the expected outcome of
// every frame comes from a model written from docs/soft-provider.md.
//
// Memory: one 4 KiB arena holds four registered regions (R0: PD 0, remote
// read/write, both flush types; R1: PD 0, remote read only; R2: another PD;
// L: PD 0, local write only — receive buffers and READ destinations) and
// unregistered guard bytes between and around them.
//
// Input layout:
//   byte 0   bits 0-3: receives to post (at most 10, the QP's limit), each of
//            byte 1 % 65 bytes in L
//   byte 2   bits 0-2: requests to post before the frames (each takes one
//            byte: bits 0-1 write/read/send/write, bit 2 signaled, bits 3-7
//            length), so that responses have something to retire
//   then     a stream of frames: 12-byte header (magic, version, type, flags,
//            length, big-endian, as on the wire) and payload. It stops at the
//            first header parse_header refuses, at a frame cut short by the
//            end of the input, and at a protocol error (each ends the link
//            in the provider). Connection-manager frames are skipped (another
//            part of the provider handles them).
//   rkeys    a request whose rkey field is < 8 is rewritten before it is
//            handed over: the rkey becomes that of R0, R1, R2 or L (field & 3)
//            and the address field an offset from that region's base (two's
//            complement, wrapping), so inputs reach the bounds of real regions
//            whose keys are random. Other rkeys go through as they are.
//
// Oracle, after every frame: the verdict, the frames the QP sent (type,
// value, READ data), the arena byte for byte (nothing outside a region the
// frame was allowed to write changes; what it writes is what it carried),
// and every completion (wr_id, status, opcode, byte count, immediate) equal
// the model's.
#include "fuzz_input.hpp"
#include "provider/provider.hpp"
#include "provider/soft/soft_datapath.hpp"
#include "provider/soft/soft_wire.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>
#include <span>
#include <vector>

namespace {

namespace prov = arpma::provider;
namespace dp = arpma::provider::soft_dp;
namespace wire = arpma::provider::soft_wire;
__extension__ typedef unsigned __int128
    u128;  // NOLINT(modernize-use-using): __extension__ keeps -Wpedantic quiet
using prov::wc_opcode;
using prov::wc_status;

constexpr const char* kName = "soft_datapath_frames_fuzz";
constexpr std::size_t kArena = 4096;
constexpr std::uint32_t kMaxMessage = 8u << 20;  // docs: the longest message

void check(bool ok, const char* what) {
  if (!ok) fuzz::property_failed(kName, what);
}

// Big-endian fields, as the documentation gives the wire format.
std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}
std::uint64_t be64(const std::uint8_t* p) { return (std::uint64_t{be32(p)} << 32) | be32(p + 4); }
void put_be32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}
void put_be64(std::uint8_t* p, std::uint64_t v) {
  put_be32(p, static_cast<std::uint32_t>(v >> 32));
  put_be32(p + 4, static_cast<std::uint32_t>(v));
}

// Frame types and sizes from docs/soft-provider.md, "Wire protocol".
enum : std::uint8_t {
  t_send = 16,
  t_send_imm,
  t_write,
  t_write_imm,
  t_read_req,
  t_atomic_write,
  t_flush,
  t_ack,
  t_nak,
  t_read_resp
};

struct region {
  std::size_t offset;  // in the arena
  std::size_t length;
  int access;
  int pd;
  prov::mr* handle = nullptr;
  std::uint32_t rkey = 0;
  std::uint32_t lkey = 0;
};

constexpr int kAll = prov::access::remote_write | prov::access::remote_read |
                     prov::access::flush_global | prov::access::flush_persistent |
                     prov::access::local_write;

struct world {
  alignas(64) std::array<std::uint8_t, kArena> arena{};
  std::array<dp::soft_pd, 2> pds;
  std::array<region, 4> regions{
      {{256, 1024, kAll, 0},
       {1536, 512, prov::access::remote_read, 0},
       {2304, 256, prov::access::remote_write | prov::access::remote_read, 1},
       {2816, 512, prov::access::local_write, 0}}};
  world() {
    for (region& r : regions) {
      auto m = dp::register_mr(&pds[static_cast<std::size_t>(r.pd)], arena.data() + r.offset,
                               r.length, r.access);
      if (!m) fuzz::property_failed(kName, "register_mr failed");
      r.handle = m.value();
      r.rkey = dp::rkey_of(r.handle);
      r.lkey = dp::lkey_of(r.handle);
    }
  }
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  ~world() {
    for (region& r : regions) (void)dp::deregister_mr(r.handle);
  }
  [[nodiscard]] std::uint64_t base(const region& r) const {
    return reinterpret_cast<std::uintptr_t>(arena.data() + r.offset);
  }
  region& local() { return regions[3]; }
};

world& the_world() {
  static world w;
  return w;
}

struct sent_frame {
  std::uint8_t type;
  std::uint32_t value;  // ACK count, NAK status
  std::vector<std::uint8_t> data;
};

struct expected_wc {
  std::uint64_t wr_id;
  wc_status status;
  wc_opcode opcode;
  std::uint32_t byte_len;
  bool with_imm;
  std::uint32_t imm;
};

struct posted {
  std::uint64_t wr_id;
  wc_opcode opcode;
  bool signaled;
  std::uint32_t length;
  std::uint64_t local_addr;
};

struct posted_recv {
  std::uint64_t wr_id;
  std::uint64_t addr;
  std::uint32_t length;
};

/// The model of one QP: what on_frame must do, from the documentation.
class model {
 public:
  explicit model(world& w) : w_(w) { std::memcpy(shadow_.data(), w.arena.data(), kArena); }

  std::deque<posted> sq;
  std::deque<posted_recv> rq;
  std::vector<sent_frame> out;
  std::vector<expected_wc> wcs;
  std::array<std::uint8_t, kArena> shadow_{};
  bool error = false;

  /// The verdict on_frame must give.
  dp::verdict on(std::uint8_t type, std::span<const std::uint8_t> p) {
    if (type >= t_ack) return response(type, p);
    if (error) return dp::verdict::done;  // a QP in error executes nothing
    switch (type) {
      case t_send: return send(p, std::nullopt);
      case t_send_imm: return send(p.subspan(4), be32(p.data()));
      case t_write: return write(p, false);
      case t_write_imm: return write(p, true);
      case t_read_req: return read(p);
      case t_atomic_write: return atomic(p);
      case t_flush: return flush(p);
      default: check(false, "model: unknown request type"); return dp::verdict::protocol_error;
    }
  }

 private:
  world& w_;

  /// The arena offset of [addr, addr + len) in the region with `rkey`, if it
  /// is reachable with `need` from PD 0.
  std::optional<std::size_t> reach(std::uint32_t rkey, std::uint64_t addr, std::uint64_t len,
                                   int need, bool whole = false) const {
    for (const region& r : w_.regions) {
      if (r.rkey != rkey) continue;
      if (r.pd != 0 || (r.access & need) != need) return std::nullopt;
      if (whole) return r.offset;
      const u128 base = w_.base(r);
      if (u128{addr} < base || u128{addr} + len > base + r.length) return std::nullopt;
      return r.offset + static_cast<std::size_t>(addr - w_.base(r));
    }
    return std::nullopt;
  }

  std::size_t offset_of(std::uint64_t addr) const {
    return static_cast<std::size_t>(addr - reinterpret_cast<std::uintptr_t>(w_.arena.data()));
  }

  void flush_all() {
    error = true;
    for (const posted& o : sq)
      wcs.push_back({o.wr_id, wc_status::wr_flush_err, o.opcode, o.length, false, 0});
    sq.clear();
    for (const posted_recv& r : rq)
      wcs.push_back({r.wr_id, wc_status::wr_flush_err, wc_opcode::recv, 0, false, 0});
    rq.clear();
  }

  dp::verdict refuse(wc_status status) {
    out.push_back({t_nak, static_cast<std::uint32_t>(status), {}});
    flush_all();
    return dp::verdict::done;
  }

  void ack() { out.push_back({t_ack, 1, {}}); }

  dp::verdict send(std::span<const std::uint8_t> data, std::optional<std::uint32_t> imm) {
    if (rq.empty()) return dp::verdict::rnr_wait;
    const posted_recv r = rq.front();
    rq.pop_front();
    const auto n = static_cast<std::uint32_t>(data.size());
    if (data.size() > r.length) {
      wcs.push_back(
          {r.wr_id, wc_status::loc_len_err, wc_opcode::recv, n, imm.has_value(), imm.value_or(0)});
      return refuse(wc_status::rem_inv_req_err);
    }
    if (!data.empty()) std::memcpy(shadow_.data() + offset_of(r.addr), data.data(), data.size());
    ack();
    wcs.push_back(
        {r.wr_id, wc_status::success, wc_opcode::recv, n, imm.has_value(), imm.value_or(0)});
    return dp::verdict::done;
  }

  dp::verdict write(std::span<const std::uint8_t> p, bool with_imm) {
    const auto data = p.subspan(with_imm ? 16 : 12);
    if (with_imm && rq.empty()) return dp::verdict::rnr_wait;
    if (!data.empty()) {
      const auto at =
          reach(be32(p.data()), be64(p.data() + 4), data.size(), prov::access::remote_write);
      if (!at) return refuse(wc_status::rem_access_err);
      std::memcpy(shadow_.data() + *at, data.data(), data.size());
    }
    ack();
    if (with_imm) {
      const posted_recv r = rq.front();
      rq.pop_front();
      wcs.push_back({r.wr_id, wc_status::success, wc_opcode::recv_rdma_with_imm,
                     static_cast<std::uint32_t>(data.size()), true, be32(p.data() + 12)});
    }
    return dp::verdict::done;
  }

  dp::verdict read(std::span<const std::uint8_t> p) {
    const std::uint32_t len = be32(p.data() + 12);
    if (len > kMaxMessage) return dp::verdict::protocol_error;
    sent_frame f{t_read_resp, 0, {}};
    if (len > 0) {
      const auto at = reach(be32(p.data()), be64(p.data() + 4), len, prov::access::remote_read);
      if (!at) return refuse(wc_status::rem_access_err);
      f.data.assign(shadow_.begin() + static_cast<std::ptrdiff_t>(*at),
                    shadow_.begin() + static_cast<std::ptrdiff_t>(*at + len));
    }
    out.push_back(std::move(f));
    return dp::verdict::done;
  }

  dp::verdict atomic(std::span<const std::uint8_t> p) {
    const std::uint64_t addr = be64(p.data() + 4);
    if (addr % 8 != 0) return refuse(wc_status::rem_inv_req_err);
    const auto at = reach(be32(p.data()), addr, 8, prov::access::remote_write);
    if (!at) return refuse(wc_status::rem_access_err);
    std::memcpy(shadow_.data() + *at, p.data() + 12, 8);  // the value's bytes as sent
    ack();
    return dp::verdict::done;
  }

  dp::verdict flush(std::span<const std::uint8_t> p) {
    const std::uint8_t type = p[20];
    const std::uint8_t level = p[21];
    if (type > 1 || level > 1) return dp::verdict::protocol_error;
    const int need = type == 1 ? prov::access::flush_persistent : prov::access::flush_global;
    if (!reach(be32(p.data()), be64(p.data() + 4), be64(p.data() + 12), need, level == 1))
      return refuse(wc_status::rem_access_err);
    ack();
    return dp::verdict::done;
  }

  void complete_ok(const posted& o) {
    if (o.signaled) wcs.push_back({o.wr_id, wc_status::success, o.opcode, o.length, false, 0});
  }

  dp::verdict response(std::uint8_t type, std::span<const std::uint8_t> p) {
    if (error) return dp::verdict::done;  // flushed already
    if (type == t_ack) {
      const std::uint32_t count = be32(p.data());
      if (count == 0) return dp::verdict::protocol_error;
      for (std::uint32_t i = 0; i < count; ++i) {
        if (sq.empty() || sq.front().opcode == wc_opcode::rdma_read)
          return dp::verdict::protocol_error;
        complete_ok(sq.front());
        sq.pop_front();
      }
      return dp::verdict::done;
    }
    if (type == t_nak) {
      const std::uint32_t status = be32(p.data());
      const bool known = status == 9 || status == 10 || status == 11 || status == 13;
      if (!known || sq.empty()) return dp::verdict::protocol_error;
      const posted o = sq.front();
      sq.pop_front();
      wcs.push_back({o.wr_id, static_cast<wc_status>(status), o.opcode, o.length, false, 0});
      flush_all();
      return dp::verdict::done;
    }
    // READ response
    if (sq.empty() || sq.front().opcode != wc_opcode::rdma_read || p.size() != sq.front().length)
      return dp::verdict::protocol_error;
    const posted o = sq.front();
    sq.pop_front();
    if (!p.empty()) std::memcpy(shadow_.data() + offset_of(o.local_addr), p.data(), p.size());
    complete_ok(o);
    return dp::verdict::done;
  }
};

/// Decodes what the QP sent, independently of the provider's encoder.
sent_frame decode(const wire::frame& head, std::span<const std::uint8_t> tail) {
  check(head.size() >= 12, "a sent frame is shorter than a header");
  const std::uint8_t* h = head.data();
  check(be32(h) == 0x4152504d && h[4] == 1 && h[6] == 0 && h[7] == 0,
        "a sent frame has a wrong magic, version or flags");
  check(be32(h + 8) == head.size() - 12 + tail.size(), "a sent frame's length is wrong");
  sent_frame f{h[5], 0, {}};
  if (f.type == t_ack || f.type == t_nak) {
    check(head.size() == 16 && tail.empty(), "an ACK/NAK is not 4 bytes");
    f.value = be32(h + 12);
  } else if (f.type == t_read_resp) {
    f.data.assign(head.begin() + 12, head.end());
    f.data.insert(f.data.end(), tail.begin(), tail.end());
  }
  return f;
}

bool same(const sent_frame& a, const sent_frame& b) {
  return a.type == b.type && a.value == b.value && a.data == b.data;
}

bool same(const prov::work_completion& got, const expected_wc& want) {
  return got.wr_id == want.wr_id && got.status == want.status && got.opcode == want.opcode &&
         (want.status != wc_status::success || got.byte_len == want.byte_len) &&
         got.with_imm == want.with_imm && (!want.with_imm || got.imm_data == want.imm);
}

/// The rkey and address translation described in the header comment.
void translate(world& w, std::uint8_t type, std::vector<std::uint8_t>& p) {
  if (type < t_write || type > t_flush || type == t_send_imm) return;
  const std::uint32_t field = be32(p.data());
  if (field >= 8) return;
  const region& r = w.regions[field & 3];
  put_be32(p.data(), r.rkey);
  put_be64(p.data() + 4, w.base(r) + be64(p.data() + 4));
}

void post_requests(world& w, fuzz::input& in, dp::soft_qp& qp, model& m, unsigned count) {
  for (unsigned i = 0; i < count; ++i) {
    const std::uint8_t b = in.u8();
    prov::send_wr wr;
    wr.wr_id = 1000 + i;
    wr.signaled = (b & 4) != 0;
    wr.local = {w.base(w.local()) + 64 * i, static_cast<std::uint32_t>(b >> 3), w.local().lkey};
    wc_opcode op = wc_opcode::rdma_write;
    switch (b & 3) {
      case 1:
        wr.opcode = prov::wr_opcode::rdma_read;
        op = wc_opcode::rdma_read;
        break;
      case 2:
        wr.opcode = prov::wr_opcode::send;
        op = wc_opcode::send;
        break;
      default: wr.opcode = prov::wr_opcode::rdma_write; break;
    }
    wr.rkey = w.regions[0].rkey;
    wr.remote_addr = w.base(w.regions[0]);
    check(!dp::post_send(qp, wr), "post_send failed");
    m.sq.push_back({wr.wr_id, op, wr.signaled, wr.local.length, wr.local.addr});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  world& w = the_world();
  for (std::size_t i = 0; i < kArena; ++i) w.arena[i] = static_cast<std::uint8_t>(i * 37 + 11);
  model m(w);
  fuzz::input in(data, size);

  dp::soft_cq cq;
  dp::soft_qp qp;
  qp.pd = &w.pds[0];
  qp.send_cq = &cq;
  qp.recv_cq = &cq;
  qp.num = 7;
  std::vector<sent_frame> sent;
  dp::link_ops link;
  link.send = [&sent](wire::frame head, std::span<const std::uint8_t> tail,
                      dp::payload_source /*source*/,
                      bool /*batch*/) { sent.push_back(decode(head, tail)); };
  link.progress = std::make_shared<const std::function<void(dp::drive)>>([](dp::drive) {});
  dp::make_ready(qp, std::move(link));

  const unsigned recvs = std::min(in.u8() & 0xfu, 10u);
  const auto recv_len = static_cast<std::uint32_t>(in.u8() % 65);
  for (unsigned i = 0; i < recvs; ++i) {
    const prov::recv_wr r{500 + i, {w.base(w.local()) + 48 * i, recv_len, w.local().lkey}};
    check(!dp::post_recv(qp, r), "post_recv failed");
    m.rq.push_back({r.wr_id, r.local.addr, r.local.length});
  }
  post_requests(w, in, qp, m, in.u8() & 7u);
  sent.clear();  // our own requests: checked for form by decode(), not compared

  while (in.left() >= wire::header_size) {
    wire::header_bytes hb{};
    const auto hs = in.bytes(wire::header_size);
    std::copy(hs.begin(), hs.end(), hb.begin());
    const auto h = wire::parse_header(hb);
    if (!h) break;                     // the provider closes the link
    if (h->length > in.left()) break;  // cut short: the provider would wait for the rest
    const auto body = in.bytes(h->length);
    if (!wire::is_data(h->type)) continue;
    const auto type = static_cast<std::uint8_t>(h->type);
    check(type >= t_send && type <= t_read_resp, "parse_header let an unknown data type through");
    std::vector<std::uint8_t> payload(body.begin(), body.end());
    translate(w, type, payload);

    const dp::verdict want = m.on(type, payload);
    const dp::verdict got = dp::on_frame(qp, h->type, payload);
    check(got == want, "on_frame's verdict differs from the model's");
    check(sent.size() == m.out.size(), "the QP sent a different number of frames");
    for (std::size_t i = 0; i < sent.size(); ++i)
      check(same(sent[i], m.out[i]), "the QP sent a different frame");
    check(std::memcmp(w.arena.data(), m.shadow_.data(), kArena) == 0,
          "memory differs from the model (a byte outside what the frame may write changed)");
    {
      const std::lock_guard lock(cq.mutex);
      check(cq.entries.size() == m.wcs.size(), "a different number of completions");
      for (std::size_t i = 0; i < m.wcs.size(); ++i)
        check(same(cq.entries.at(i), m.wcs[i]), "a completion differs from the model's");
    }
    if (got == dp::verdict::protocol_error) break;  // the provider fails the link
  }
  dp::destroy(qp);
  return 0;
}
