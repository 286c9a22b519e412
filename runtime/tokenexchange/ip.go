package tokenexchange

import "net"

// parseIP parses a literal IP address, nil when host is a name.
func parseIP(host string) net.IP { return net.ParseIP(host) }
