// A tiny OpenAI-style streaming server for the load generator's tests (Boost.Beast, one
// thread per connection). Every completion streams exactly max_tokens chunks: the first after
// `first_delay`, the rest `itl` apart, then a usage chunk and [DONE], so the client's TTFT,
// TPOT and ITL have known true values. Every `fail_every`-th request answers HTTP 500 instead.
// No /tokenize: prompts reach it as token ids (completions) or words (chat).
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace loom::test {

struct FakeServerOptions {
  std::chrono::milliseconds first_delay{100};
  std::chrono::milliseconds itl{10};
  int fail_every = 0;  // 0 = never fail
};

class FakeServer {
 public:
  explicit FakeServer(FakeServerOptions o)
      : o_(o), acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~FakeServer() {
    stop_ = true;
    boost::system::error_code ec;
    {  // wake the blocking accept
      boost::asio::ip::tcp::socket s(ioc_);
      s.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
      accept_thread_.join();
    }
    acceptor_.close(ec);
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : conns_) t.join();
  }
  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_.load(); }
  // Largest number of completions streaming at the same time.
  int peak_in_flight() const { return peak_.load(); }

 private:
  void accept_loop() {
    while (!stop_) {
      boost::system::error_code ec;
      boost::asio::ip::tcp::socket s(ioc_);
      acceptor_.accept(s, ec);
      if (ec || stop_) return;
      std::lock_guard<std::mutex> lock(mu_);
      conns_.emplace_back([this, sock = std::move(s)]() mutable { serve(std::move(sock)); });
    }
  }

  void serve(boost::asio::ip::tcp::socket sock) {
    namespace http = boost::beast::http;
    boost::beast::flat_buffer buf;
    boost::system::error_code ec;
    for (;;) {
      http::request<http::string_body> req;
      http::read(sock, buf, req, ec);
      if (ec) return;
      if (req.method() == http::verb::get && req.target() == "/v1/models") {
        reply(sock, 200, R"({"object":"list","data":[{"id":"fake-model","object":"model"}]})");
      } else if (req.method() == http::verb::post &&
                 (req.target() == "/v1/completions" || req.target() == "/v1/chat/completions")) {
        const int n = ++requests_;
        if (o_.fail_every > 0 && n % o_.fail_every == 0) {
          reply(sock, 500, R"({"error":{"message":"injected failure"}})");
        } else {
          stream(sock, req.body(), req.target() == "/v1/chat/completions");
          return;  // the stream ends with Connection: close
        }
      } else {
        reply(sock, 404, R"({"error":{"message":"not found"}})");
      }
      if (!req.keep_alive()) return;
    }
  }

  void reply(boost::asio::ip::tcp::socket& sock, int status, const std::string& body) {
    namespace http = boost::beast::http;
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::content_type, "application/json");
    res.body() = body;
    res.prepare_payload();
    boost::system::error_code ec;
    http::write(sock, res, ec);
  }

  void stream(boost::asio::ip::tcp::socket& sock, const std::string& body, bool chat) {
    namespace http = boost::beast::http;
    auto j = nlohmann::json::parse(body, nullptr, false);
    int max_tokens = chat ? j.value("max_completion_tokens", 16) : j.value("max_tokens", 16);
    int64_t prompt_tokens = 0;
    if (chat) {
      std::istringstream words(j["messages"][0]["content"].get<std::string>());
      std::string w;
      while (words >> w) ++prompt_tokens;
    } else {
      prompt_tokens = j["prompt"].is_array() ? static_cast<int64_t>(j["prompt"].size()) : 1;
    }
    const int now = ++in_flight_;
    for (int p = peak_.load(); now > p && !peak_.compare_exchange_weak(p, now);) {
    }
    boost::system::error_code ec;
    http::response<http::empty_body> res{http::status::ok, 11};
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::connection, "close");
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    http::write_header(sock, sr, ec);
    auto send = [&](const std::string& data) {
      std::string event = "data: " + data + "\n\n";
      boost::asio::write(sock, http::make_chunk(boost::asio::buffer(event)), ec);
    };
    std::this_thread::sleep_for(o_.first_delay);
    for (int i = 0; i < max_tokens && !ec; ++i) {
      if (i > 0) std::this_thread::sleep_for(o_.itl);
      nlohmann::json choice = chat ? nlohmann::json{{"index", 0}, {"delta", {{"content", "t"}}}}
                                   : nlohmann::json{{"index", 0}, {"text", "t"}};
      send(nlohmann::json{{"id", "x"}, {"choices", {choice}}}.dump());
    }
    // Out of flight before the client can see the end: decremented after the last write, a
    // descheduled handler thread still counted while the client's next request (its slot
    // freed by [DONE]) came in, and peak_in_flight read 4 under --max-concurrency 3.
    --in_flight_;
    send(nlohmann::json{
        {"id", "x"},
        {"choices", nlohmann::json::array()},
        {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", max_tokens}}}}
             .dump());
    send("[DONE]");
    boost::asio::write(sock, http::make_chunk_last(), ec);
    sock.shutdown(boost::asio::ip::tcp::socket::shutdown_send, ec);
  }

  FakeServerOptions o_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0}, in_flight_{0}, peak_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<std::thread> conns_;
};

}  // namespace loom::test
