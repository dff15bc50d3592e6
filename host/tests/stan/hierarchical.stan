// Groups' means around a common mean, with the between-group sd tau given: the common mean's
// posterior is then Gaussian in closed form (the groups integrate out).
data {
  int<lower=1> J;
  vector[J] y;
  vector<lower=0>[J] s;
  real<lower=0> tau;
}
parameters {
  real mu;
  vector[J] eta;
}
transformed parameters {
  vector[J] theta = mu + tau * eta;
}
model {
  mu ~ normal(0, 5);
  eta ~ std_normal();
  y ~ normal(theta, s);
}
