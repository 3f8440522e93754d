#include "resident/flow/detail/plan.hpp"

#include <algorithm>

#include "resident/error.hpp"

namespace resident::detail::flow_plan {

plan make(device home, int lanes_per_device, const std::vector<device>& device_of,
          const std::vector<std::vector<stage_id>>& preds, const std::vector<stage_id>& order) {
  RESIDENT_EXPECTS(lanes_per_device >= 1, "flow plan: needs at least one stream per device");
  RESIDENT_EXPECTS(device_of.size() == preds.size() && order.size() == preds.size(),
                   "flow plan: " + std::to_string(device_of.size()) + " devices, " + std::to_string(preds.size()) +
                       " predecessor lists and " + std::to_string(order.size()) + " stages in order");
  const std::size_t n = preds.size();
  // Per device in order of first use: its next stream (round robin) and each stream's last stage.
  struct device_lanes {
    device dev;
    int next = 0;
    std::vector<stage_id> tail;
  };
  constexpr stage_id none = stage_id(-1);
  std::vector<device_lanes> devices;
  auto lanes_of = [&](device d) -> device_lanes& {
    for (auto& l : devices)
      if (l.dev == d) return l;
    devices.push_back({d, 0, std::vector<stage_id>(std::size_t(lanes_per_device), none)});
    return devices.back();
  };
  lanes_of(home);
  std::vector<lane> lane_of(n);
  std::vector<bool> issued(n, false);
  plan p;
  for (stage_id i : order) {
    RESIDENT_EXPECTS(i < n && !issued[i], "flow plan: the order names stage " + std::to_string(i) + " twice or beyond " +
                                              std::to_string(n));
    const device d = device_of[i];
    device_lanes& dl = lanes_of(d);
    int k = -1;
    for (stage_id q : preds[i]) {
      RESIDENT_EXPECTS(q < n && issued[q], "flow plan: stage " + std::to_string(i) + " comes before its predecessor " +
                                               std::to_string(q) + " in the order");
      if (lane_of[q].dev == d && dl.tail[std::size_t(lane_of[q].index)] == q) {
        k = lane_of[q].index;
        break;
      }
    }
    if (k < 0) {
      k = dl.next;
      dl.next = (dl.next + 1) % lanes_per_device;
    }
    step st;
    st.stage = i;
    st.on = {d, k};
    st.first_on_lane = dl.tail[std::size_t(k)] == none && !(st.on == lane{home, 0});
    for (stage_id q : preds[i])
      if (!(lane_of[q] == st.on)) st.waits.push_back(q);
    lane_of[i] = st.on;
    dl.tail[std::size_t(k)] = i;
    issued[i] = true;
    p.steps.push_back(std::move(st));
  }
  for (const auto& dl : devices)
    for (std::size_t k = 0; k < dl.tail.size(); ++k)
      if (dl.tail[k] != none && !(lane{dl.dev, int(k)} == lane{home, 0})) p.tails.push_back({{dl.dev, int(k)}, dl.tail[k]});
  return p;
}

namespace {
// The one device of `which` ranges (of home's backend) a stage touches: none, one, or a refusal.
std::optional<device> one_device(const std::string& stage, const std::vector<access::range>& ranges, device home,
                                 const char* verb) {
  std::optional<device> found;
  for (const auto& r : ranges) {
    if (!r.where || r.where->kind() != home.kind() || !r.bytes) continue;
    if (found && !(*found == *r.where))
      RESIDENT_FAIL("flow: stage '" + stage + "' " + verb + " memory of " + found->name() + " and of " +
                        r.where->name() + "; a stage runs on one device: split it into one stage per device (the "
                        "flow orders them with events), or name its device with access::on",
                    device_mismatch);
    found = r.where;
  }
  return found;
}
}  // namespace

device stage_device(const std::string& stage, const access& acc, device home) {
  if (const auto& named = acc.named_device()) {
    if (named->kind() != home.kind())
      RESIDENT_FAIL("flow: stage '" + stage + "' is to run on " + named->name() + ", the flow on " + home.name() +
                        "; a flow's stages run on devices of its own backend: make the flow on " +
                        (named->is_cpu() ? std::string("the cpu") : std::string("a GPU")),
                    device_mismatch);
    return *named;
  }
  if (auto w = one_device(stage, acc.write_ranges(), home, "writes")) return *w;
  if (auto r = one_device(stage, acc.read_ranges(), home, "reads (and writes nothing) from")) return *r;
  return home;
}

}  // namespace resident::detail::flow_plan
