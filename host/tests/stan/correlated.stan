// A correlated Gaussian whose posterior is its data: mean mu, covariance Sigma.
data {
  vector[2] mu;
  cov_matrix[2] Sigma;
}
parameters {
  vector[2] theta;
}
model {
  theta ~ multi_normal(mu, Sigma);
}
generated quantities {
  // Its expectation is trace(Sigma).
  real sq_dist = dot_self(theta - mu);
}
