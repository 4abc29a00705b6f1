// The numbers the reports print (text tables, HTML), each format named for
// what it writes, so that a column reads the same wherever it appears.
// None of them adds a unit: the column title or the caller's text says it.
#pragma once

#include <string>

namespace gpuos {

// Nanoseconds as milliseconds with 3 decimals: 1234567 -> "1.235".
std::string FormatMs3(double ns);

// Nanoseconds as milliseconds with as many decimals as a reader needs to
// compare them: 1 at 100 ms and above, 2 from 1 ms, else 3
// (123.4, 12.35, 0.123).  The web page's choice.
std::string FormatMsAutoDecimals(double ns);

// Nanoseconds as microseconds with 1 decimal: 1234 -> "1.2".
std::string FormatUs1(double ns);

// Bytes as MiB with 1 decimal: 1572864 -> "1.5".
std::string FormatMiB1(double bytes);

// A share (0..1) as a percentage with 1 decimal, no sign: 0.1234 -> "12.3".
std::string FormatPct1(double share);

// part / whole, 0 when whole is not positive.
double Share(double part, double whole);

}  // namespace gpuos
