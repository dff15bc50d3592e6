// A standard normal that rejects every point above 1: the target is the normal truncated there.
parameters {
  real x;
}
model {
  if (x > 1) {
    reject("x is above 1: ", x);
  }
  x ~ std_normal();
}
