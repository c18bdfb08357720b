// Which local address a rank binds for its peers to reach it, chosen the way
// NCCL chooses its interface: the user's variables first (TCV_GLOO_HOSTNAME,
// GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME), then, for a job that spans
// machines, the host's name when it resolves to one of this machine's own
// non-loopback addresses, else the address of the interface that routes to
// MASTER_ADDR. (A hostname that resolves to 127.0.0.1 is normal on cloud images
// and in containers; binding it would publish 127.0.0.1 to the other machines.)
#pragma once

#include <string>
#include <vector>

#include "dist/env.h"

namespace tcv::dist {

/// One address of a local network interface.
struct NetInterface {
  std::string name;     ///< e.g. "eth0"
  std::string address;  ///< numeric, e.g. "10.0.0.2" or "fe80::1"
  bool ipv6 = false;
  bool loopback = false;
  bool up = false;
};

/// What the choice needs to know about the machine; the real one asks the
/// kernel and the resolver, tests substitute their own.
class NetProbe {
 public:
  virtual ~NetProbe() = default;
  /// Every address of every interface, in the kernel's order.
  virtual std::vector<NetInterface> interfaces() const = 0;
  /// The local address the kernel would send from to reach `host` ("" and
  /// `error` set when it cannot be resolved or has no route).
  virtual std::string route_source(const std::string& host, std::string& error) const = 0;
  /// This machine's host name.
  virtual std::string hostname() const = 0;
  /// The numeric addresses `name` resolves to (empty when it does not resolve).
  virtual std::vector<std::string> resolve(const std::string& name) const = 0;
};

/// The probe of this machine (getifaddrs, a UDP connect to find the route,
/// gethostname, getaddrinfo).
const NetProbe& system_net_probe();

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_address(const std::string& host);

/// NCCL_SOCKET_IFNAME's grammar, also used for GLOO_SOCKET_IFNAME: a comma
/// list of interface name prefixes ("eth,ib"); "^" before the list excludes
/// them instead ("^docker,lo"); "=" before the list asks for exact names
/// ("=eth0"), and "^=" excludes exact names.
struct IfnameFilter {
  std::vector<std::string> names;
  bool exclude = false;
  bool exact = false;

  /// Throws tcv::Error naming `variable` on an empty list or an empty name.
  static IfnameFilter parse(const std::string& spec, const std::string& variable);
  bool matches(const std::string& ifname) const;
};

/// How the address a rank binds was chosen.
struct BindChoice {
  std::string address;    ///< what to bind: a numeric address or a host name
  std::string interface;  ///< the interface holding it ("" when not known)
  std::string reason;     ///< why, for the announcement and errors
  /// "<backend>: bound to <address> (<interface>, <reason>)".
  std::string describe(const std::string& backend) const;
};

/// What the choice starts from.
struct BindRequest {
  /// An address or host name given in code (ProcessGroupOptions::gloo_hostname).
  std::string explicit_host{};
  /// Rank 0's store: MASTER_ADDR.
  std::string master_addr = "127.0.0.1";
  /// The variables read: TCV_GLOO_HOSTNAME, GLOO_SOCKET_IFNAME,
  /// NCCL_SOCKET_IFNAME (for Gloo: the first set of the three, in this order;
  /// for NCCL only NCCL_SOCKET_IFNAME), LOCAL_WORLD_SIZE and WORLD_SIZE.
  EnvMap env{};
  /// Which of the variables apply: Gloo honours all three, NCCL its own.
  enum class Backend : uint8_t { gloo, nccl } backend = Backend::gloo;
};

/// Chooses the address. Throws tcv::Error naming the variable when an
/// interface list matches no interface with an address, and naming
/// MASTER_ADDR when the job spans machines and no route to it exists.
BindChoice choose_bind_address(const BindRequest& request, const NetProbe& probe);

/// True unless the environment says every rank runs on this machine
/// (MASTER_ADDR is a loopback address, or LOCAL_WORLD_SIZE equals WORLD_SIZE).
bool job_spans_machines(const std::string& master_addr, const EnvMap& env);

/// For NCCL's bootstrap: when the user set no NCCL_SOCKET_IFNAME and the job
/// spans machines, the interface that routes to `master_addr` as an exact
/// NCCL_SOCKET_IFNAME value ("=eth1"), else "" (leave NCCL's own choice).
/// `choice` receives what was chosen, for the announcement.
std::string nccl_socket_ifname(const std::string& master_addr, const EnvMap& env,
                               const NetProbe& probe, BindChoice* choice = nullptr);

}  // namespace tcv::dist
