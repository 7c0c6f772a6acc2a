/* sd-bus (libsystemd). The SD_BUS_VTABLE_* / SD_BUS_METHOD / SD_BUS_PROPERTY macros do not import into
 * Swift, so vtable entries are built here. Each entry is zeroed first: sd-bus requires unused union bytes
 * to be zero. */
#include <string.h>
#include <systemd/sd-bus.h>

static inline sd_bus_vtable CSystemd_vtableStart(uint64_t flags) {
    sd_bus_vtable v; memset(&v, 0, sizeof v);
    v.type = _SD_BUS_VTABLE_START; v.flags = flags;
    v.x.start.element_size = sizeof(sd_bus_vtable);
    v.x.start.features = _SD_BUS_VTABLE_PARAM_NAMES;
    v.x.start.vtable_format_reference = &sd_bus_object_vtable_format;
    return v;
}
static inline sd_bus_vtable CSystemd_vtableMethod(const char *member, const char *signature, const char *result,
                                                  sd_bus_message_handler_t handler, uint64_t flags) {
    sd_bus_vtable v; memset(&v, 0, sizeof v);
    v.type = _SD_BUS_VTABLE_METHOD; v.flags = flags;
    v.x.method.member = member; v.x.method.signature = signature; v.x.method.result = result;
    v.x.method.handler = handler; v.x.method.names = "";
    return v;
}
static inline sd_bus_vtable CSystemd_vtableProperty(const char *member, const char *signature,
                                                    sd_bus_property_get_t get, sd_bus_property_set_t set,
                                                    uint64_t flags) {
    sd_bus_vtable v; memset(&v, 0, sizeof v);
    v.type = set ? _SD_BUS_VTABLE_WRITABLE_PROPERTY : _SD_BUS_VTABLE_PROPERTY; v.flags = flags;
    v.x.property.member = member; v.x.property.signature = signature;
    v.x.property.get = get; v.x.property.set = set;
    return v;
}
static inline sd_bus_vtable CSystemd_vtableSignal(const char *member, const char *signature, uint64_t flags) {
    sd_bus_vtable v; memset(&v, 0, sizeof v);
    v.type = _SD_BUS_VTABLE_SIGNAL; v.flags = flags;
    v.x.signal.member = member; v.x.signal.signature = signature; v.x.signal.names = "";
    return v;
}
static inline sd_bus_vtable CSystemd_vtableEnd(void) {
    sd_bus_vtable v; memset(&v, 0, sizeof v); v.type = _SD_BUS_VTABLE_END; return v;
}
static inline uint64_t CSystemd_flagEmitsChange(void) { return SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE; }
static inline uint64_t CSystemd_flagUnprivileged(void) { return SD_BUS_VTABLE_UNPRIVILEGED; }
