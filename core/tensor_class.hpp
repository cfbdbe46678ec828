// Lifetime classes the placer sorts tensors into (see placer/classify.hpp). Kept in core because
// both the Profile's join (page false sharing) and the Plan speak of them.
#pragma once

#include <cstdint>
#include <string_view>

namespace tierpack {

enum class TensorClass : std::uint8_t {
  temporary,   ///< op-scoped: born and dead within a short window (a few ops)
  activation,  ///< forward-to-backward: born in forward, last used in backward
  iteration,   ///< iteration-scoped: lives across many ops but dies before the iteration ends
  persistent,  ///< alive across iterations: parameters, gradients, optimizer state
};
inline constexpr int kTensorClassCount = 4;

std::string_view to_string(TensorClass c);
/// Throws logic_error naming the accepted values.
TensorClass parse_tensor_class(std::string_view text);

}  // namespace tierpack
