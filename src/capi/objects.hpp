// The C handles: each wraps the C++ object that does the work.
#pragma once

#include "arpma/conn_req.hpp"
#include "arpma/peer.hpp"

struct rpma_peer {
  arpma::peer cxx;
};

struct rpma_conn_req {
  arpma::conn_req cxx;
};
