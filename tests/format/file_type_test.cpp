// general.file_type names: llama.cpp's llama_ftype values (llama.h), as Ollama reports them.
#include "format/file_type.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

TEST(FileType, LlamaCppValuesHaveTheirNames) {
  const std::pair<int, const char*> known[] = {
      {0, "F32"},      {1, "F16"},      {2, "Q4_0"},      {3, "Q4_1"},    {7, "Q8_0"},
      {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},     {11, "Q3_K_S"}, {12, "Q3_K_M"},
      {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"},   {16, "Q5_K_S"}, {17, "Q5_K_M"},
      {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},   {21, "Q2_K_S"}, {22, "IQ3_XS"},
      {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},   {26, "IQ3_S"},  {27, "IQ3_M"},
      {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},   {31, "IQ1_M"},  {32, "BF16"},
      {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4_MOE"}};
  for (const auto& [value, name] : known) {
    EXPECT_EQ(file_type_name(value), name) << value;
    EXPECT_EQ(file_type_value(name), value) << name;
  }
  for (const char* other : {"", "Q4_K", "q4_k_m", "MXFP4"})
    EXPECT_FALSE(file_type_value(other).has_value()) << other;
  for (int unused : {-1, 4, 5, 6, 33, 34, 35, 39, 1000})
    EXPECT_FALSE(file_type_name(unused).has_value()) << unused;
}

}  // namespace
}  // namespace loom
