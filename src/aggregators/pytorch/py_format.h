// Python's number semantics, for views that must print exactly what a Python
// tool printed (the PyTorch plugin's published numbers, pytorch_view.h):
// round() with ties to even, round(x, n) on the exact binary value, repr()
// of a float, and f"{x:.nf}".
#ifndef LIVEPROF_AGGREGATORS_PYTORCH_PY_FORMAT_H_
#define LIVEPROF_AGGREGATORS_PYTORCH_PY_FORMAT_H_

#include <string>

namespace liveprof {

// Python's round(x): to the nearest integer, exact halves to the even one
// (2906.5 -> 2906, 2907.5 -> 2908). Returns the integral double.
double PyRound(double x);
// Python's round(x, ndigits): correctly rounded on the exact binary value of
// x, ties (only when x is exactly a half) to even: PyRound(0.125, 2) == 0.12,
// PyRound(2.675, 2) == 2.67 (2.675 is stored as 2.67499999...).
double PyRound(double x, int ndigits);
// Python's repr(float): the shortest text that reads back to x, in Python's
// layout: "7.7", "0.0", "100.0", "-0.0", "1e-05", "1e+16", "inf", "nan".
std::string PyRepr(double x);
// Python's f"{x:.{decimals}f}" (correctly rounded, ties to even).
std::string PyFormatFixed(double x, int decimals);

}  // namespace liveprof

#endif  // LIVEPROF_AGGREGATORS_PYTORCH_PY_FORMAT_H_
