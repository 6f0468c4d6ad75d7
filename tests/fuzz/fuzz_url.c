/* fuzz_url.c -- libFuzzer harness for the connection URL parser and the
   dispatcher: no crash, no read past the string's NUL (ASan), whatever the
   bytes. `make fuzz-url` runs it for a bounded time. The input is copied
   into a buffer of exactly its size plus the NUL, so any over-read hits
   ASan's redzone. Backends are made only for URLs that parse; they are
   freed by simba_destroy without any connection attempt (no tick). */
#define SIMBA_IMPLEMENTATION
#define SIMBA_REDIS_IMPLEMENTATION
#define SIMBA_MYSQL_IMPLEMENTATION
#define SIMBA_ZK_IMPLEMENTATION
#include "simba.h"
#define SIMBA_MEM_IMPLEMENTATION
#include "simba_mem.h"
#include "simba_redis.h"
#include "simba_mysql.h"
#include "simba_zk.h"
#define SIMBA_URL_IMPLEMENTATION
#include "simba_url.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = (char *)malloc(size + 1);
    static simba_url u;
    simba_url_error e;
    simba_desc d;
    int ms;
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    /* password_file would read files named by the input: not in a fuzzer */
    if (!strstr(s, "password_file")) {
        memset(&d, 0, sizeof d);
        if (simba_url_desc(s, &u, &d, &e) == SIMBA_OK) {
            simba *c = simba_create(&d, NULL);
            simba_destroy(c);
        } else if (!memchr(e.msg, 0, sizeof e.msg) || !e.part[0]) {
            abort();   /* every error must name a part, in a terminated message */
        }
    }
    simba_parse_duration_ms(s, &ms);
    free(s);
    return 0;
}
