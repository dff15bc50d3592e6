parameters {
  real x
}
model {
  x ~ std_normal();
}
