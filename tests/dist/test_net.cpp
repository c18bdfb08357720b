// Which address a rank binds (dist/net.h), on machines described by a fake
// probe: interface lists as NCCL reads them, the route to MASTER_ADDR when the
// host name resolves to loopback, and named errors.
#include "dist/net.h"

#include <gtest/gtest.h>

#include <map>

#include "engine/error.h"

using namespace tcv;
using namespace tcv::dist;

namespace {

class FakeProbe : public NetProbe {
 public:
  std::vector<NetInterface> ifs;
  std::map<std::string, std::string> routes;  // host -> local source address
  std::string host = "vm";
  std::map<std::string, std::vector<std::string>> names;

  std::vector<NetInterface> interfaces() const override { return ifs; }
  std::string route_source(const std::string& h, std::string& error) const override {
    const auto it = routes.find(h);
    if (it == routes.end()) {
      error = "Network is unreachable";
      return "";
    }
    return it->second;
  }
  std::string hostname() const override { return host; }
  std::vector<std::string> resolve(const std::string& name) const override {
    const auto it = names.find(name);
    return it == names.end() ? std::vector<std::string>{} : it->second;
  }
};

// A cloud machine: loopback, a docker bridge, two NICs; its name resolves to 127.0.0.1.
FakeProbe cloud_machine() {
  FakeProbe p;
  p.ifs = {
      {"lo", "127.0.0.1", false, true, true},     {"docker0", "172.17.0.1", false, false, true},
      {"eth0", "10.0.0.2", false, false, true},   {"eth0", "fe80::2", true, false, true},
      {"ib0", "192.168.1.2", false, false, true}, {"eth1", "10.1.0.2", false, false, false}};
  p.routes = {{"10.0.0.1", "10.0.0.2"}, {"192.168.1.1", "192.168.1.2"}};
  p.names = {{"vm", {"127.0.0.1"}}};
  return p;
}

BindRequest several_machines(EnvMap extra = {}) {
  BindRequest r;
  r.master_addr = "10.0.0.1";
  r.env = {{"WORLD_SIZE", "16"}, {"LOCAL_WORLD_SIZE", "8"}};
  for (auto& [k, v] : extra) r.env[k] = v;
  return r;
}

}  // namespace

TEST(IfnameFilter, PrefixesExclusionsAndExactNames) {
  const auto f = IfnameFilter::parse("eth,ib", "NCCL_SOCKET_IFNAME");
  EXPECT_TRUE(f.matches("eth0"));
  EXPECT_TRUE(f.matches("ib1"));
  EXPECT_FALSE(f.matches("docker0"));
  const auto x = IfnameFilter::parse("^docker,lo", "NCCL_SOCKET_IFNAME");
  EXPECT_TRUE(x.matches("eth0"));
  EXPECT_FALSE(x.matches("docker0"));
  EXPECT_FALSE(x.matches("lo"));
  const auto e = IfnameFilter::parse("=eth0", "GLOO_SOCKET_IFNAME");
  EXPECT_TRUE(e.matches("eth0"));
  EXPECT_FALSE(e.matches("eth01"));
  const auto xe = IfnameFilter::parse("^=eth0", "GLOO_SOCKET_IFNAME");
  EXPECT_FALSE(xe.matches("eth0"));
  EXPECT_TRUE(xe.matches("eth01"));
  try {
    IfnameFilter::parse("eth,,ib", "GLOO_SOCKET_IFNAME");
    FAIL() << "an empty name was accepted";
  } catch (const Error& err) {
    EXPECT_NE(
        std::string(err.what()).find("GLOO_SOCKET_IFNAME='eth,,ib' has an empty interface name"),
        std::string::npos)
        << err.what();
  }
}

TEST(BindAddress, LoopbackHostnameOnSeveralMachinesTakesTheRouteToMaster) {
  const FakeProbe p = cloud_machine();
  const BindChoice c = choose_bind_address(several_machines(), p);
  EXPECT_EQ(c.address, "10.0.0.2");
  EXPECT_EQ(c.interface, "eth0");
  EXPECT_EQ(c.describe("gloo"),
            "gloo: bound to 10.0.0.2 (eth0, the route to MASTER_ADDR 10.0.0.1; hostname 'vm' "
            "resolves to 127.0.0.1)");
}

TEST(BindAddress, HostnameOfAnAddressOfThisMachineIsKept) {
  FakeProbe p = cloud_machine();
  p.names["vm"] = {"192.168.1.2"};
  const BindChoice c = choose_bind_address(several_machines(), p);
  EXPECT_EQ(c.address, "vm");
  EXPECT_EQ(c.interface, "ib0");
  EXPECT_EQ(c.reason, "hostname 'vm' resolves to 192.168.1.2");
  // A name that resolves elsewhere (a stale /etc/hosts) is not bound.
  p.names["vm"] = {"203.0.113.9"};
  const BindChoice d = choose_bind_address(several_machines(), p);
  EXPECT_EQ(d.address, "10.0.0.2");
  EXPECT_NE(d.reason.find("hostname 'vm' resolves to 203.0.113.9, not an address of this machine"),
            std::string::npos)
      << d.reason;
}

TEST(BindAddress, OneMachineUsesLoopback) {
  const FakeProbe p = cloud_machine();
  BindRequest r;
  r.master_addr = "127.0.0.1";
  r.env = {{"WORLD_SIZE", "2"}};
  EXPECT_EQ(choose_bind_address(r, p).describe("gloo"),
            "gloo: bound to 127.0.0.1 (lo, every rank is on this machine: MASTER_ADDR 127.0.0.1 "
            "is a loopback address)");
  r.master_addr = "10.0.0.1";
  r.env = {{"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "2"}};
  const BindChoice c = choose_bind_address(r, p);
  EXPECT_EQ(c.address, "127.0.0.1");
  EXPECT_EQ(c.reason, "every rank is on this machine: LOCAL_WORLD_SIZE = WORLD_SIZE = 2");
}

TEST(BindAddress, VariablesWinInPyTorchsOrder) {
  const FakeProbe p = cloud_machine();
  BindChoice c = choose_bind_address(
      several_machines({{"TCV_GLOO_HOSTNAME", "10.0.0.2"}, {"GLOO_SOCKET_IFNAME", "ib"}}), p);
  EXPECT_EQ(c.address, "10.0.0.2");
  EXPECT_EQ(c.reason, "TCV_GLOO_HOSTNAME=10.0.0.2");
  c = choose_bind_address(
      several_machines({{"GLOO_SOCKET_IFNAME", "ib"}, {"NCCL_SOCKET_IFNAME", "eth"}}), p);
  EXPECT_EQ(c.address, "192.168.1.2");
  EXPECT_EQ(c.describe("gloo"), "gloo: bound to 192.168.1.2 (ib0, GLOO_SOCKET_IFNAME=ib)");
  // NCCL's variable serves Gloo too; IPv4 before IPv6; down interfaces skipped.
  c = choose_bind_address(several_machines({{"NCCL_SOCKET_IFNAME", "eth"}}), p);
  EXPECT_EQ(c.address, "10.0.0.2");
  EXPECT_EQ(c.reason, "NCCL_SOCKET_IFNAME=eth");
  // Excluding the usual suspects: the first left, preferring the one that routes to MASTER_ADDR.
  c = choose_bind_address(several_machines({{"GLOO_SOCKET_IFNAME", "^lo,docker"}}), p);
  EXPECT_EQ(c.address, "10.0.0.2");
  BindRequest ib = several_machines({{"GLOO_SOCKET_IFNAME", "^lo,docker"}});
  ib.master_addr = "192.168.1.1";
  EXPECT_EQ(choose_bind_address(ib, p).address, "192.168.1.2");
  // Given in code: as it is.
  BindRequest code = several_machines({{"TCV_GLOO_HOSTNAME", "10.0.0.2"}});
  code.explicit_host = "ib-host";
  EXPECT_EQ(choose_bind_address(code, p).address, "ib-host");
}

TEST(BindAddress, NamedErrors) {
  const FakeProbe p = cloud_machine();
  try {
    choose_bind_address(several_machines({{"GLOO_SOCKET_IFNAME", "=eth1"}}), p);
    FAIL() << "a down interface was bound";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[gloo] GLOO_SOCKET_IFNAME='=eth1' matches no interface that is up and has "
                     "an address (this machine has: lo 127.0.0.1, docker0 172.17.0.1, eth0 "
                     "10.0.0.2, eth0 fe80::2, ib0 192.168.1.2, eth1 10.1.0.2 (down))"),
              std::string::npos)
        << m;
  }
  BindRequest far = several_machines();
  far.master_addr = "10.9.9.9";
  try {
    choose_bind_address(far, p);
    FAIL() << "no route, yet an address";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[gloo] no route from this machine to MASTER_ADDR 10.9.9.9 (Network is "
                     "unreachable), and hostname 'vm' resolves to 127.0.0.1; set "
                     "GLOO_SOCKET_IFNAME (or TCV_GLOO_HOSTNAME)"),
              std::string::npos)
        << m;
  }
}

TEST(BindAddress, NcclIsGivenTheRoutedInterfaceOnlyWhenTheUserSetNone) {
  const FakeProbe p = cloud_machine();
  BindChoice c;
  EXPECT_EQ(nccl_socket_ifname("10.0.0.1", several_machines().env, p, &c), "=eth0");
  EXPECT_EQ(c.describe("nccl"),
            "nccl: bound to 10.0.0.2 (eth0, the route to MASTER_ADDR 10.0.0.1; hostname 'vm' "
            "resolves to 127.0.0.1; NCCL_SOCKET_IFNAME set to '=eth0' for NCCL's bootstrap)");
  // The user's own variable is left alone (and said).
  BindChoice u;
  EXPECT_EQ(
      nccl_socket_ifname("10.0.0.1", several_machines({{"NCCL_SOCKET_IFNAME", "ib"}}).env, p, &u),
      "");
  EXPECT_EQ(u.reason, "NCCL_SOCKET_IFNAME=ib");
  // One machine: NCCL's own choice.
  EXPECT_EQ(nccl_socket_ifname("127.0.0.1", {{"WORLD_SIZE", "8"}}, p), "");
  // GLOO_SOCKET_IFNAME is Gloo's only.
  EXPECT_EQ(nccl_socket_ifname("10.0.0.1", several_machines({{"GLOO_SOCKET_IFNAME", "ib"}}).env, p),
            "=eth0");
}

TEST(BindAddress, ThisMachineAnswers) {
  // The real probe: this machine has a loopback interface and a name.
  const NetProbe& p = system_net_probe();
  bool lo = false;
  for (const auto& i : p.interfaces()) lo |= i.loopback && i.address == "127.0.0.1";
  EXPECT_TRUE(lo);
  EXPECT_FALSE(p.hostname().empty());
  std::string err;
  EXPECT_EQ(p.route_source("127.0.0.1", err), "127.0.0.1") << err;
  EXPECT_TRUE(is_loopback_address("127.0.1.1"));
  EXPECT_FALSE(is_loopback_address("10.0.0.1"));
}
