// Where a tensor lives. Only the CPU runs here; cuda:N is named so errors can say "wrong device".
#pragma once
#include <string>

namespace tb::core {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string str() const { return type == DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace tb::core
