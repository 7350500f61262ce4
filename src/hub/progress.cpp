#include "hub/progress.h"

#include <unistd.h>

#include <cstdio>

#include "base/format_bytes.h"

namespace loom::hub {

DownloadProgress DownloadProgress::for_stderr(bool quiet) {
  return DownloadProgress(!quiet, isatty(STDERR_FILENO) != 0);
}

void DownloadProgress::start(const std::string& name, uint64_t total, uint64_t resumed_from) {
  name_ = name;
  total_ = total;
  have_ = start_bytes_ = resumed_from;
  last_quarter_ = -1;
  t0_ = last_draw_ = std::chrono::steady_clock::now();
  if (!enabled_) return;
  if (resumed_from > 0)
    std::fprintf(stderr, "loom pull: resuming %s at %s of %s\n", name.c_str(),
                 format_bytes(resumed_from).c_str(), format_bytes(total).c_str());
  else if (!tty_)
    std::fprintf(stderr, "loom pull: downloading %s (%s)\n", name.c_str(),
                 format_bytes(total).c_str());
  draw();
}

void DownloadProgress::update(uint64_t have) {
  have_ = have;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_ && now - last_draw_ < std::chrono::milliseconds(100) && have != total_) return;
  last_draw_ = now;
  draw();
}

void DownloadProgress::draw() {
  if (!enabled_ || total_ == 0) return;
  const double frac = have_ >= total_ ? 1.0 : static_cast<double>(have_) / total_;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double rate = secs > 0 ? (have_ - start_bytes_) / secs : 0;
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(filled, '#');
    bar.resize(kWidth, '-');
    std::fprintf(stderr, "\r%-32.32s [%s] %3d%% %10s/s\033[K", name_.c_str(), bar.c_str(),
                 static_cast<int>(frac * 100), format_bytes(static_cast<uint64_t>(rate)).c_str());
    return;
  }
  const int quarter = static_cast<int>(frac * 4);
  if (quarter <= last_quarter_) return;
  last_quarter_ = quarter;
  if (quarter == 0) return;  // the "downloading" line said it
  std::fprintf(stderr, "loom pull: %s %d%% (%s of %s)\n", name_.c_str(), quarter * 25,
               format_bytes(have_).c_str(), format_bytes(total_).c_str());
}

void DownloadProgress::finish(bool ok) {
  if (!enabled_) return;
  if (tty_) std::fputc('\n', stderr);
  (void)ok;
}

}  // namespace loom::hub
