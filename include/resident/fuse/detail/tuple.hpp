#pragma once
/// @file tuple.hpp
/// A minimal tuple and a function chain usable in host and device code alike (std::tuple is not
/// device code, and cuda::std is not there in a CPU-only build).

#include <cstddef>
#include <utility>

#include "resident/config.hpp"

namespace resident::detail {

template <std::size_t I, class T>
struct leaf {
  T value;
};

template <class Seq, class... Ts>
struct tuple_base;
template <std::size_t... I, class... Ts>
struct tuple_base<std::index_sequence<I...>, Ts...> : leaf<I, Ts>... {};

/// tuple<A, B>{{a}, {b}}: an aggregate, trivially copyable when its elements are.
template <class... Ts>
using tuple = tuple_base<std::index_sequence_for<Ts...>, Ts...>;

template <std::size_t I, class T>
RESIDENT_HD constexpr T& get(leaf<I, T>& l) {
  return l.value;
}
template <std::size_t I, class T>
RESIDENT_HD constexpr const T& get(const leaf<I, T>& l) {
  return l.value;
}

template <class... Ts>
RESIDENT_HD constexpr tuple<Ts...> make_tuple(Ts... ts) {
  return tuple<Ts...>{{ts}...};
}

template <class A>
RESIDENT_HD constexpr A only(A a) {
  return a;
}

/// Stages applied one after another: chain<F, G>(x) = G(F(x)). The first stage may take several
/// arguments (from zip); each later stage takes the previous result.
template <class... Fs>
struct chain {
  tuple<Fs...> fs;

  template <class... A>
  RESIDENT_HD constexpr auto operator()(A... a) const {
    return step<0>(a...);
  }

 private:
  template <std::size_t I, class... A>
  RESIDENT_HD constexpr auto step(A... a) const {
    if constexpr (I == sizeof...(Fs)) {
      static_assert(sizeof...(A) == 1, "a zip of several arrays must be followed by a map that combines them");
      return only(a...);
    } else {
      return step<I + 1>(get<I>(fs)(a...));
    }
  }
};

template <class... Fs, class... Gs, std::size_t... I, std::size_t... J>
constexpr chain<Fs..., Gs...> concat(const chain<Fs...>& a, const chain<Gs...>& b, std::index_sequence<I...>,
                                     std::index_sequence<J...>) {
  return chain<Fs..., Gs...>{tuple<Fs..., Gs...>{{get<I>(a.fs)}..., {get<J>(b.fs)}...}};
}
template <class... Fs, class... Gs>
constexpr chain<Fs..., Gs...> concat(const chain<Fs...>& a, const chain<Gs...>& b) {
  return concat(a, b, std::index_sequence_for<Fs...>{}, std::index_sequence_for<Gs...>{});
}

}  // namespace resident::detail
