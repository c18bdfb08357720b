#include "dist/net.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/error.h"

namespace tcv::dist {

namespace {

std::string numeric_host(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (getnameinfo(sa, len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) return "";
  std::string s = host;
  if (const auto pct = s.find('%'); pct != std::string::npos) s.erase(pct);  // fe80::1%eth0
  return s;
}

class SystemNetProbe : public NetProbe {
 public:
  std::vector<NetInterface> interfaces() const override {
    std::vector<NetInterface> out;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return out;
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr) continue;
      const int family = a->ifa_addr->sa_family;
      if (family != AF_INET && family != AF_INET6) continue;
      NetInterface n;
      n.name = a->ifa_name ? a->ifa_name : "";
      n.ipv6 = family == AF_INET6;
      n.address = numeric_host(a->ifa_addr, n.ipv6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
      n.loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
      n.up = (a->ifa_flags & IFF_UP) != 0;
      if (!n.address.empty()) out.push_back(std::move(n));
    }
    freeifaddrs(list);
    return out;
  }

  std::string route_source(const std::string& host, std::string& error) const override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* res = nullptr;
    const int gai = getaddrinfo(host.c_str(), "9", &hints, &res);
    if (gai != 0) {
      error = std::string("cannot resolve it: ") + gai_strerror(gai);
      return "";
    }
    std::string found;
    error = "no address";
    for (addrinfo* a = res; a && found.empty(); a = a->ai_next) {
      const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        error = std::strerror(errno);
        continue;
      }
      // A UDP connect sends nothing; it only asks the kernel for the route.
      sockaddr_storage local{};
      socklen_t len = sizeof(local);
      if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        error = std::strerror(errno);
      } else if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
        error = std::strerror(errno);
      } else {
        found = numeric_host(reinterpret_cast<sockaddr*>(&local), len);
      }
      close(fd);
    }
    freeaddrinfo(res);
    return found;
  }

  std::string hostname() const override {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) return "";
    return name;
  }

  std::vector<std::string> resolve(const std::string& name) const override {
    std::vector<std::string> out;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (name.empty() || getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0) return out;
    for (addrinfo* a = res; a; a = a->ai_next) {
      const std::string s = numeric_host(a->ai_addr, a->ai_addrlen);
      if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    freeaddrinfo(res);
    return out;
  }
};

const std::string* find(const EnvMap& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

// The interface holding `address` ("" when none does).
std::string interface_of(const std::vector<NetInterface>& ifs, const std::string& address) {
  for (const auto& i : ifs)
    if (i.address == address) return i.name;
  return "";
}

std::string list_interfaces(const std::vector<NetInterface>& ifs) {
  std::string s;
  for (const auto& i : ifs)
    s += (s.empty() ? "" : ", ") + i.name + " " + i.address + (i.up ? "" : " (down)");
  return s.empty() ? "none" : s;
}

// "hostname 'vm' resolves to 127.0.0.1", for the reason of a route choice.
std::string hostname_note(const std::string& name, const std::vector<std::string>& addrs) {
  if (name.empty()) return "this machine has no hostname";
  if (addrs.empty()) return "hostname '" + name + "' does not resolve";
  std::string joined;
  bool all_loopback = true;
  for (const auto& a : addrs) {
    joined += (joined.empty() ? "" : ", ") + a;
    all_loopback &= is_loopback_address(a);
  }
  return "hostname '" + name + "' resolves to " + joined +
         (all_loopback ? "" : ", not an address of this machine");
}

}  // namespace

const NetProbe& system_net_probe() {
  static const SystemNetProbe probe;
  return probe;
}

bool is_loopback_address(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

IfnameFilter IfnameFilter::parse(const std::string& spec, const std::string& variable) {
  IfnameFilter f;
  std::string s = spec;
  if (!s.empty() && s[0] == '^') {
    f.exclude = true;
    s.erase(0, 1);
  }
  if (!s.empty() && s[0] == '=') {
    f.exact = true;
    s.erase(0, 1);
  }
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    const std::string name = s.substr(start, comma - start);
    TCV_CHECK(!name.empty(), variable, "='", spec,
              "' has an empty interface name (a comma list of name prefixes, e.g. \"eth,ib\"; "
              "\"^docker,lo\" excludes; \"=eth0\" asks for exact names)");
    f.names.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return f;
}

bool IfnameFilter::matches(const std::string& ifname) const {
  const bool listed = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
    return exact ? ifname == n : ifname.rfind(n, 0) == 0;
  });
  return listed != exclude;
}

std::string BindChoice::describe(const std::string& backend) const {
  return backend + ": bound to " + address + " (" + (interface.empty() ? "" : interface + ", ") +
         reason + ")";
}

bool job_spans_machines(const std::string& master_addr, const EnvMap& env) {
  if (is_loopback_address(master_addr)) return false;
  const std::string* local = find(env, "LOCAL_WORLD_SIZE");
  const std::string* world = find(env, "WORLD_SIZE");
  return !(local && world && *local == *world);
}

BindChoice choose_bind_address(const BindRequest& req, const NetProbe& probe) {
  const bool gloo = req.backend == BindRequest::Backend::gloo;
  const char* backend = gloo ? "[gloo]" : "[nccl]";
  BindChoice c;
  std::vector<NetInterface> ifs;
  auto interfaces = [&]() -> const std::vector<NetInterface>& {
    if (ifs.empty()) ifs = probe.interfaces();
    return ifs;
  };

  // Given in code or by name: taken as it is.
  if (gloo && !req.explicit_host.empty()) {
    c.address = req.explicit_host;
    c.interface = interface_of(interfaces(), c.address);
    c.reason = "given in ProcessGroupOptions::gloo_hostname";
    return c;
  }
  if (const std::string* v = gloo ? find(req.env, "TCV_GLOO_HOSTNAME") : nullptr) {
    c.address = *v;
    c.interface = interface_of(interfaces(), c.address);
    c.reason = "TCV_GLOO_HOSTNAME=" + *v;
    return c;
  }

  // An interface list: the first matching interface with an address, the one
  // routing to MASTER_ADDR if it matches, IPv4 before IPv6.
  for (const char* var : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
    if (gloo == false && std::string(var) == "GLOO_SOCKET_IFNAME") continue;
    const std::string* spec = find(req.env, var);
    if (!spec) continue;
    const IfnameFilter f = IfnameFilter::parse(*spec, var);
    std::vector<const NetInterface*> hits;
    for (const auto& i : interfaces())
      if (i.up && f.matches(i.name)) hits.push_back(&i);
    std::stable_sort(hits.begin(), hits.end(), [](const NetInterface* a, const NetInterface* b) {
      return !a->ipv6 && b->ipv6;
    });
    TCV_CHECK(!hits.empty(), backend, " ", var, "='", *spec,
              "' matches no interface that is up and has an address (this machine has: ",
              list_interfaces(interfaces()), ")");
    std::string err;
    const std::string routed = probe.route_source(req.master_addr, err);
    const NetInterface* pick = hits.front();
    for (const NetInterface* h : hits)
      if (h->address == routed) pick = h;
    c.address = pick->address;
    c.interface = pick->name;
    c.reason = std::string(var) + "=" + *spec;
    return c;
  }

  // Every rank on this machine: loopback reaches them all.
  if (!job_spans_machines(req.master_addr, req.env)) {
    c.address = "127.0.0.1";
    c.interface = interface_of(interfaces(), c.address);
    c.reason = is_loopback_address(req.master_addr)
                   ? "every rank is on this machine: MASTER_ADDR " + req.master_addr +
                         " is a loopback address"
                   : "every rank is on this machine: LOCAL_WORLD_SIZE = WORLD_SIZE = " +
                         req.env.at("WORLD_SIZE");
    return c;
  }

  // Several machines: the host name, when it names an address of this machine
  // that the others can reach; else the address that routes to MASTER_ADDR.
  const std::string host = probe.hostname();
  const std::vector<std::string> addrs = probe.resolve(host);
  for (const std::string& a : addrs) {
    if (is_loopback_address(a)) continue;
    const std::string ifname = interface_of(interfaces(), a);
    if (ifname.empty()) continue;
    c.address = host;
    c.interface = ifname;
    c.reason = "hostname '" + host + "' resolves to " + a;
    return c;
  }
  std::string err;
  const std::string routed = probe.route_source(req.master_addr, err);
  TCV_CHECK(!routed.empty(), backend, " no route from this machine to MASTER_ADDR ",
            req.master_addr, " (", err, "), and ", hostname_note(host, addrs), "; set ",
            gloo ? "GLOO_SOCKET_IFNAME (or TCV_GLOO_HOSTNAME)" : "NCCL_SOCKET_IFNAME",
            " to the interface the other machines reach this one on");
  c.address = routed;
  c.interface = interface_of(interfaces(), routed);
  c.reason = "the route to MASTER_ADDR " + req.master_addr + "; " + hostname_note(host, addrs);
  return c;
}

std::string nccl_socket_ifname(const std::string& master_addr, const EnvMap& env,
                               const NetProbe& probe, BindChoice* choice) {
  BindRequest req;
  req.master_addr = master_addr;
  req.env = env;
  req.backend = BindRequest::Backend::nccl;
  if (find(env, "NCCL_SOCKET_IFNAME") || !job_spans_machines(master_addr, env)) {
    if (choice && find(env, "NCCL_SOCKET_IFNAME")) *choice = choose_bind_address(req, probe);
    return "";
  }
  BindChoice c = choose_bind_address(req, probe);
  if (c.interface.empty()) return "";
  for (const auto& i : probe.interfaces())
    if (i.name == c.interface && i.loopback) return "";
  if (choice) {
    c.reason += "; NCCL_SOCKET_IFNAME set to '=" + c.interface + "' for NCCL's bootstrap";
    *choice = c;
  }
  return "=" + c.interface;
}

}  // namespace tcv::dist
