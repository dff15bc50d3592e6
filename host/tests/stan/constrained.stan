// Constrained parameters with known marginals: sigma ~ Gamma(3, 2) (mean 1.5), w ~ Dirichlet(alpha)
// (mean alpha / sum(alpha)), and a 2x2 matrix of standard normals for CmdStan's column-major names.
data {
  vector<lower=0>[3] alpha;
}
parameters {
  real<lower=0> sigma;
  simplex[3] w;
  matrix[2, 2] z;
}
transformed parameters {
  real log_sigma = log(sigma);
}
model {
  sigma ~ gamma(3, 2);
  w ~ dirichlet(alpha);
  to_vector(z) ~ std_normal();
}
generated quantities {
  int above = sigma > 1.5;
}
