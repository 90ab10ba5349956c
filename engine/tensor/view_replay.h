// The replay of a view op: the same op applied to another tensor of the base's shape. tensor.cpp's
// view ops (view, reshape, transpose, permute, expand, select, slice, squeeze, unsqueeze, ...) hand
// one to autograd only when their base overlaps itself (an expanded tensor): the view's gradient
// is then found in the base's index space by replaying the op on a dense proxy (Note [View
// backward] in engine/autograd/node.cpp). A hook beside AutogradHooks (Note [Autograd hooks]),
// installed by engine/autograd/variable.cpp and called instead of on_view for such views.
#pragma once
#include <functional>

#include "engine/tensor/tensor.h"

namespace tb {

using ViewReplay = std::function<Tensor(const Tensor&)>;
using OnReplayedView = void (*)(const Tensor& base, Tensor& view, const ViewReplay& replay);
OnReplayedView& on_replayed_view_hook();

}  // namespace tb
