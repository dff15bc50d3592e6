// The same Stan model's log density and gradient timed alone, in C++, with nothing between the
// loop and stan::model::log_prob_grad: the baseline shmc's calls through the library are
// measured against (bench/stan_eval.sh). Built from stanc's output with shmc's flags.
//
// usage: direct DATA.json CALLS  ->  prints "direct_ns_per_gradient N" and "direct_ns_per_value N"

#include SHMC_STAN_MODEL_HPP

#include <stan/io/json/json_data.hpp>
#include <stan/model/log_prob_grad.hpp>
#include <stan/model/log_prob_propto.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: direct DATA.json CALLS\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  stan::json::json_data data(in);
  stan_model model(data, 1, nullptr);
  long calls = std::stol(argv[2]);
  std::vector<double> q(model.num_params_r(), 0.1), gradient;
  std::vector<int> ints;
  double sink = 0;
  auto time = [&](auto&& body) {
    for (long i = 0; i < calls / 10 + 1; ++i) body();  // warm the caches and the tape
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) body();
    auto end = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(end - start).count() / calls;
  };
  double grad_ns = time([&] {
    sink += stan::model::log_prob_grad<true, true>(model, q, ints, gradient, nullptr);
  });
  double value_ns = time([&] {
    sink += stan::model::log_prob_propto<true>(model, q, ints, nullptr);
  });
  std::cout << "direct_ns_per_gradient " << grad_ns << "\n"
            << "direct_ns_per_value " << value_ns << "\n"
            << "checksum " << sink << "\n";
  return 0;
}
