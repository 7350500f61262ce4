// The route table: method + path → handler, with the cross-cutting checks (ready, API key,
// 404 / 405) made in one place.
#pragma once

#include <memory>

#include "server/http_request.h"
#include "server/responder.h"

namespace loom::server {

struct ServerContext;

void route_request(ServerContext& ctx, const HttpRequest& req, std::shared_ptr<Responder> out);

}  // namespace loom::server
