// A non-owning reference to a callable: what a function taking a callback for the length of
// the call needs, without std::function's heap allocation (a lambda capturing more than two
// references does not fit its inline buffer). The callable must outlive every call through
// the reference: pass lambdas straight to the call, or name them first.
#pragma once

#include <type_traits>
#include <utility>

namespace loom {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                              std::is_invocable_r_v<R, const F&, Args...>>>
  FunctionRef(const F& f)  // NOLINT: implicit, as std::function's
      : obj_(static_cast<const void*>(&f)), call_([](const void* obj, Args... args) -> R {
          return (*static_cast<const F*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  const void* obj_;
  R (*call_)(const void*, Args...);
};

}  // namespace loom
