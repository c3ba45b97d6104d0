// Wall-clock timestamps as people and programs read them: ISO 8601 local time with its UTC offset, the one
// format of evaluation.json and the HTML report ("2026-11-25T14:03:07+01:00").
#pragma once

#include <ctime>
#include <string>

namespace bertrain {

std::string iso_timestamp(std::time_t t);
std::string iso_timestamp_now();

}  // namespace bertrain
