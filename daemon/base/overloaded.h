// Overloaded{...}: a set of lambdas for std::visit. Every alternative of the
// variant must be matched, so a record kind added to format::Payload fails
// to compile wherever it is dispatched but not handled.
#ifndef LOUPE_DAEMON_BASE_OVERLOADED_H_
#define LOUPE_DAEMON_BASE_OVERLOADED_H_

namespace loupe {

template <class... Handlers>
struct Overloaded : Handlers... {
  using Handlers::operator()...;
};
template <class... Handlers>
Overloaded(Handlers...) -> Overloaded<Handlers...>;

}  // namespace loupe

#endif  // LOUPE_DAEMON_BASE_OVERLOADED_H_
