// DataLoader, samplers, collate and the Fashion-MNIST reader (engine/data).
#include <gtest/gtest.h>
