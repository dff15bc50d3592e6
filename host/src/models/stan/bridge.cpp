// shmc's bridge between a Stan program and BridgeStan's C interface (bridgestan.h, version 2.x):
// the functions the `bridgestan` crate loads, written over the model class stanc generates.
//
// This file is compiled in one translation unit with stanc's output, which the build names by
// defining SHMC_STAN_MODEL_HPP; stanc ends that file with `using stan_model = ...;`, so every
// call below is to the concrete class (its templates, not model_base's virtual functions).
//
// Nothing thrown inside Stan crosses the C interface: each entry point catches every exception
// and returns -1 with the message in *error_msg (freed by bs_free_error_msg), so a `reject()`,
// a domain error or bad data is an error value on the Rust side, never an abort.

#include SHMC_STAN_MODEL_HPP

#include <stan/io/empty_var_context.hpp>
#include <stan/io/json/json_data.hpp>
#include <stan/model/log_prob_grad.hpp>
#include <stan/model/log_prob_propto.hpp>
#include <stan/services/util/create_rng.hpp>
#include <stan/version.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#define SHMC_PUBLIC extern "C" __attribute__((visibility("default")))

// The BridgeStan interface version this file implements (the crate accepts 2.x, x >= its own).
SHMC_PUBLIC const int bs_major_version = 2;
SHMC_PUBLIC const int bs_minor_version = 9;
SHMC_PUBLIC const int bs_patch_version = 0;

namespace {

typedef void (*print_callback)(const char* data, std::size_t size);
print_callback user_print = nullptr;

// Where a model's print() statements go: the callback when one is set, nowhere otherwise. The
// buffer is made only for a callback: a string stream's construction (its locale) costs about
// as much as a small model's whole gradient, on every call.
class print_stream {
 public:
  print_stream() : buffer_(user_print ? new std::ostringstream : nullptr) {}
  std::ostream* get() { return buffer_.get(); }
  ~print_stream() {
    if (buffer_) {
      std::string text = buffer_->str();
      if (!text.empty()) user_print(text.c_str(), text.size());
    }
  }

 private:
  std::unique_ptr<std::ostringstream> buffer_;
};

// A thread's scratch vectors, reused from call to call instead of allocated in each.
struct scratch {
  std::vector<double> params, gradient;
  std::vector<int> params_i;
};
scratch& thread_scratch() {
  static thread_local scratch here;
  return here;
}

char* copy_message(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

void set_error(char** error_msg, const std::string& text) {
  if (error_msg) *error_msg = copy_message(text);
}

// Runs `body`, turning any exception into -1 and its message.
template <typename F>
int guarded(char** error_msg, const char* where, F&& body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    set_error(error_msg, std::string(where) + ": " + e.what());
  } catch (...) {
    set_error(error_msg, std::string(where) + ": unknown C++ exception");
  }
  return -1;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    out += names[i];
  }
  return out;
}

// A var_context from JSON text, a JSON file's path, or nothing (an empty string or NULL).
std::unique_ptr<stan::io::var_context> read_data(const char* data) {
  if (data == nullptr || data[0] == '\0')
    return std::make_unique<stan::io::empty_var_context>();
  std::string text(data);
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    std::istringstream in(text);
    return std::make_unique<stan::json::json_data>(in);
  }
  std::ifstream in(text);
  if (!in) throw std::runtime_error("cannot open data file " + text);
  return std::make_unique<stan::json::json_data>(in);
}

// Each thread keeps its own reverse-mode tape (STAN_THREADS makes it thread-local); this makes
// sure one exists on a thread Stan did not start.
void ensure_tape() {
  static thread_local stan::math::ChainableStack tape;
  (void)tape;
}

}  // namespace

class bs_rng {
 public:
  explicit bs_rng(unsigned int seed) : rng(stan::services::util::create_rng(seed, 0)) {}
  stan::rng_t rng;
};

class bs_model {
 public:
  bs_model(const char* data, unsigned int seed) : seed_(seed) {
    std::unique_ptr<stan::io::var_context> context = read_data(data);
    print_stream out;
    model_ = std::make_unique<stan_model>(*context, seed, out.get());
    name_ = model_->model_name();
    info_ = "shmc bridge over stanc output; Stan " + stan::MAJOR_VERSION + "."
            + stan::MINOR_VERSION + "." + stan::PATCH_VERSION + "; STAN_THREADS=true";
    std::vector<std::string> names;
    model_->unconstrained_param_names(names, false, false);
    unc_names_ = join(names);
    unc_num_ = static_cast<int>(names.size());
    for (int tp = 0; tp < 2; ++tp)
      for (int gq = 0; gq < 2; ++gq) {
        names.clear();
        model_->constrained_param_names(names, tp, gq);
        names_[tp][gq] = join(names);
        num_[tp][gq] = static_cast<int>(names.size());
      }
  }

  const stan_model& model() const { return *model_; }
  const char* name() const { return name_.c_str(); }
  const char* info() const { return info_.c_str(); }
  const char* names(bool tp, bool gq) const { return names_[tp][gq].c_str(); }
  int num(bool tp, bool gq) const { return num_[tp][gq]; }
  const char* unc_names() const { return unc_names_.c_str(); }
  int unc_num() const { return unc_num_; }

 private:
  unsigned int seed_;
  std::unique_ptr<stan_model> model_;
  std::string name_, info_, unc_names_;
  std::string names_[2][2];
  int num_[2][2];
  int unc_num_;
};

SHMC_PUBLIC bs_model* bs_model_construct(const char* data, unsigned int seed, char** error_msg) {
  bs_model* out = nullptr;
  guarded(error_msg, "constructing the model", [&] { out = new bs_model(data, seed); });
  return out;
}

SHMC_PUBLIC void bs_model_destruct(bs_model* m) { delete m; }

SHMC_PUBLIC void bs_free_error_msg(char* error_msg) { std::free(error_msg); }

SHMC_PUBLIC const char* bs_name(const bs_model* m) { return m->name(); }

SHMC_PUBLIC const char* bs_model_info(const bs_model* m) { return m->info(); }

SHMC_PUBLIC const char* bs_param_names(const bs_model* m, bool include_tp, bool include_gq) {
  return m->names(include_tp, include_gq);
}

SHMC_PUBLIC const char* bs_param_unc_names(const bs_model* m) { return m->unc_names(); }

SHMC_PUBLIC int bs_param_num(const bs_model* m, bool include_tp, bool include_gq) {
  return m->num(include_tp, include_gq);
}

SHMC_PUBLIC int bs_param_unc_num(const bs_model* m) { return m->unc_num(); }

SHMC_PUBLIC int bs_param_constrain(const bs_model* m, bool include_tp, bool include_gq,
                                   const double* theta_unc, double* theta, bs_rng* rng,
                                   char** error_msg) {
  if (include_gq && rng == nullptr) {
    set_error(error_msg, "generated quantities need an RNG");
    return -1;
  }
  return guarded(error_msg, "constraining parameters", [&] {
    Eigen::VectorXd unc = Eigen::Map<const Eigen::VectorXd>(theta_unc, m->unc_num());
    Eigen::VectorXd out;
    print_stream msgs;
    if (rng) {
      m->model().write_array(rng->rng, unc, out, include_tp, include_gq, msgs.get());
    } else {
      stan::rng_t unused = stan::services::util::create_rng(0, 0);
      m->model().write_array(unused, unc, out, include_tp, false, msgs.get());
    }
    Eigen::Map<Eigen::VectorXd>(theta, out.size()) = out;
  });
}

SHMC_PUBLIC int bs_param_unconstrain(const bs_model* m, const double* theta, double* theta_unc,
                                     char** error_msg) {
  return guarded(error_msg, "unconstraining parameters", [&] {
    Eigen::VectorXd constrained
        = Eigen::Map<const Eigen::VectorXd>(theta, m->num(false, false));
    Eigen::VectorXd unc;
    m->model().unconstrain_array(constrained, unc, nullptr);
    Eigen::Map<Eigen::VectorXd>(theta_unc, unc.size()) = unc;
  });
}

SHMC_PUBLIC int bs_param_unconstrain_json(const bs_model* m, const char* json, double* theta_unc,
                                          char** error_msg) {
  return guarded(error_msg, "reading initial values", [&] {
    std::istringstream in(json);
    stan::json::json_data context(in);
    std::vector<int> params_i;
    std::vector<double> unc;
    print_stream msgs;
    m->model().transform_inits(context, params_i, unc, msgs.get());
    std::copy(unc.begin(), unc.end(), theta_unc);
  });
}

SHMC_PUBLIC int bs_param_initialize(const bs_model* m, const char*, bs_rng*, double, int, bool,
                                    double*, char** error_msg) {
  (void)m;
  set_error(error_msg, "shmc chooses initial points itself (bs_param_initialize is not built)");
  return -1;
}

SHMC_PUBLIC int bs_log_density(const bs_model* m, bool propto, bool jacobian,
                               const double* theta_unc, double* lp, char** error_msg) {
  return guarded(error_msg, "log density", [&] {
    ensure_tape();
    scratch& s = thread_scratch();
    std::vector<double>& params = s.params;
    std::vector<int>& params_i = s.params_i;
    params.assign(theta_unc, theta_unc + m->unc_num());
    print_stream msgs;
    const stan_model& model = m->model();
    if (propto) {
      // Dropping constants needs the autodiff types (log_prob_propto runs on vars).
      *lp = jacobian ? stan::model::log_prob_propto<true>(model, params, params_i, msgs.get())
                     : stan::model::log_prob_propto<false>(model, params, params_i, msgs.get());
    } else {
      *lp = jacobian ? model.template log_prob<false, true>(params, params_i, msgs.get())
                     : model.template log_prob<false, false>(params, params_i, msgs.get());
    }
  });
}

SHMC_PUBLIC int bs_log_density_gradient(const bs_model* m, bool propto, bool jacobian,
                                        const double* theta_unc, double* val, double* grad,
                                        char** error_msg) {
  return guarded(error_msg, "log density gradient", [&] {
    ensure_tape();
    scratch& s = thread_scratch();
    std::vector<double>& params = s.params;
    std::vector<double>& gradient = s.gradient;
    std::vector<int>& params_i = s.params_i;
    params.assign(theta_unc, theta_unc + m->unc_num());
    print_stream msgs;
    const stan_model& model = m->model();
    double lp;
    if (propto)
      lp = jacobian ? stan::model::log_prob_grad<true, true>(model, params, params_i, gradient,
                                                            msgs.get())
                    : stan::model::log_prob_grad<true, false>(model, params, params_i,
                                                             gradient, msgs.get());
    else
      lp = jacobian ? stan::model::log_prob_grad<false, true>(model, params, params_i,
                                                             gradient, msgs.get())
                    : stan::model::log_prob_grad<false, false>(model, params, params_i,
                                                              gradient, msgs.get());
    *val = lp;
    std::copy(gradient.begin(), gradient.end(), grad);
  });
}

SHMC_PUBLIC int bs_log_density_hessian(const bs_model*, bool, bool, const double*, double*,
                                       double*, double*, char** error_msg) {
  set_error(error_msg, "this library was built without Hessians");
  return -1;
}

SHMC_PUBLIC int bs_log_density_hessian_vector_product(const bs_model*, bool, bool,
                                                      const double*, const double*, double*,
                                                      double*, char** error_msg) {
  set_error(error_msg, "this library was built without Hessians");
  return -1;
}

SHMC_PUBLIC bs_rng* bs_rng_construct(unsigned int seed, char** error_msg) {
  bs_rng* out = nullptr;
  guarded(error_msg, "constructing an RNG", [&] { out = new bs_rng(seed); });
  return out;
}

SHMC_PUBLIC void bs_rng_destruct(bs_rng* rng) { delete rng; }

SHMC_PUBLIC int bs_set_print_callback(print_callback callback, char**) {
  user_print = callback;
  return 0;
}
