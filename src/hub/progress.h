// Download progress on stderr: a bar redrawn in place on a terminal, plain lines at every
// quarter otherwise (logs and CI keep a readable record).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace loom::hub {

class DownloadProgress {
 public:
  // `enabled` false prints nothing; `tty` picks the bar over plain lines.
  DownloadProgress(bool enabled, bool tty) : enabled_(enabled), tty_(tty) {}
  static DownloadProgress for_stderr(bool quiet);

  void start(const std::string& name, uint64_t total, uint64_t resumed_from);
  void update(uint64_t have);
  void finish(bool ok);

 private:
  bool enabled_, tty_;
  std::string name_;
  uint64_t total_ = 0, have_ = 0;
  int last_quarter_ = -1;
  std::chrono::steady_clock::time_point t0_, last_draw_;
  uint64_t start_bytes_ = 0;

  void draw();
};

}  // namespace loom::hub
