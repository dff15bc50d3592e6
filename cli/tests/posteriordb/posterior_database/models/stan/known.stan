// Written for shmc's posteriordb test: every parameter's posterior is known in closed form.
// mu: a normal mean with a normal prior and unit-variance data, so its posterior is normal;
// tau: bounded below and untouched by the data, so its posterior is its Exponential(1) prior;
// theta: a vector, so its draws carry indexed names, each a normal of its own.
data {
  int<lower=1> N;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[2] theta;
}
model {
  mu ~ normal(0, 10);
  y ~ normal(mu, 1);
  tau ~ exponential(1);
  theta[1] ~ normal(1, 2);
  theta[2] ~ normal(-3, 0.5);
}
